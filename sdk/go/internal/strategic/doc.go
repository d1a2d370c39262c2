// Package strategic computes a strategic merge patch from two objects, as Kubernetes'
// strategicpatch.CreateTwoWayMergePatch does, on objects decoded by package jsonv and the patch
// metadata the generated types carry (codec.PatchFields) instead of reflection on k8s.io/api's
// struct tags. The patch is the one controller-runtime's StrategicMergeFrom sends, member for
// member; internal/typegen's tests compare the two on every built-in kind.
//
// What it makes of two objects:
//   - a member added or changed is in the patch, a member removed is null, objects are diffed
//     member by member, and a list Kubernetes replaces whole is in the patch whole if it changed;
//   - a list Kubernetes merges by a key (containers by name) holds the items added, and of
//     each item changed its key and what changed in it, then {key, "$patch": "delete"} for
//     each item removed, with "$setElementOrder/NAME" listing the keys in their new order;
//   - a list of strings it merges (finalizers) holds the values added, with
//     "$deleteFromPrimitiveList/NAME" for those removed and "$setElementOrder/NAME";
//   - an object whose strategy is retainKeys (a volume's source, a Deployment's strategy)
//     lists its members in "$retainKeys" when anything in it changed.
package strategic
