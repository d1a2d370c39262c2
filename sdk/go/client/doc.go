// Package client is a controller-runtime-shaped client on the generated Kubernetes types of
// sdk/go/k8s (and a plugin's own CRD types with the same generated methods): Get, List, Create,
// Update, Patch, Delete, DeleteAllOf, Status() and Event, taking and filling typed objects.
//
// Code written against sigs.k8s.io/controller-runtime/pkg/client ports by changing imports:
//
//	var d appsv1.Deployment
//	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
//		return ctrl.Result{}, client.IgnoreNotFound(err)
//	}
//
// Reads come from the host's informer cache, writes go to the API server, as the
// controller-runtime client a manager gives does. Objects travel as JSON, read and written by
// the generated codecs without reflection. What differs from controller-runtime is listed on
// each call and in docs/plugin-authors.md: the field manager of every write is the plugin's
// name, followed by "/" and the FieldOwner if the write names one, List takes no limit or
// continue and tests MatchingFields in the plugin (with the indexes IndexField registers, whose
// values it tells the host, which hands back only the items that match or it was not told of), and
// DeleteAllOf deletes what a List finds, one object at a time.
package client
