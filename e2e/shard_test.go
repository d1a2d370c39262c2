package e2e

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The local control plane serves sharded lists (the ShardedListAndWatch feature gate): two
// halves of the hash range by uid split a namespace's objects with none lost and none twice, and
// each response says which shard it is. What sharded plugins will build on.
func TestShardedListSplitsObjects(t *testing.T) {
	ns := namespace(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	const n = 200
	for i := range n {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", i)}}, metav1.CreateOptions{})
		must(t, err)
	}
	seen := map[string]int{}
	for _, r := range [][2]string{{"0x0000000000000000", "0x8000000000000000"}, {"0x8000000000000000", "0xffffffffffffffff"}} {
		sel := fmt.Sprintf("shardRange(object.metadata.uid, '%s', '%s')", r[0], r[1])
		list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{ShardSelector: sel})
		must(t, err)
		if list.ShardInfo == nil || list.ShardInfo.Selector == "" {
			t.Fatalf("list with shardSelector %s: no shardInfo in the response: is the ShardedListAndWatch gate on?", sel)
		}
		if len(list.Items) == 0 || len(list.Items) == n {
			t.Errorf("shard %s holds %d of %d objects: not a split", sel, len(list.Items), n)
		}
		for _, cm := range list.Items {
			seen[cm.Name]++
		}
	}
	// The upper bound is exclusive: an object hashing to 0xffffffffffffffff would be in no half.
	// Its odds with 200 objects are about 1e-17.
	if len(seen) != n {
		t.Errorf("the two halves hold %d distinct objects, want %d", len(seen), n)
	}
	for name, times := range seen {
		if times != 1 {
			t.Errorf("%s is in %d halves", name, times)
		}
	}
}
