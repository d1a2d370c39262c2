package controller

import (
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/wasmrec/wasmrec/host/reconcile"
)

// Default rate-limiter settings, as controller-runtime and client-go have them.
const (
	DefaultBaseDelay = 5 * time.Millisecond
	DefaultMaxDelay  = 1000 * time.Second
	DefaultQPS       = 10
	DefaultBurst     = 100
)

// DefaultRateLimiter is the larger of a per-key exponential backoff (5 ms * 2^failures, capped
// at 1000 s) and an overall token bucket (10 qps, burst 100) read on clk.
func DefaultRateLimiter(clk clock.PassiveClock) workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](DefaultBaseDelay, DefaultMaxDelay),
		NewBucketRateLimiter[reconcile.Request](DefaultQPS, DefaultBurst, clk),
	)
}

// BucketRateLimiter is an overall token bucket shared by every key. It differs from client-go's
// TypedBucketRateLimiter only in reading time from an injected clock, so its schedule can be
// tested with a fake one.
type BucketRateLimiter[T comparable] struct {
	limiter *rate.Limiter
	clock   clock.PassiveClock
}

// NewBucketRateLimiter returns a bucket that refills at qps and holds burst tokens.
func NewBucketRateLimiter[T comparable](qps float64, burst int, clk clock.PassiveClock) *BucketRateLimiter[T] {
	return &BucketRateLimiter[T]{limiter: rate.NewLimiter(rate.Limit(qps), burst), clock: clk}
}

var _ workqueue.TypedRateLimiter[reconcile.Request] = (*BucketRateLimiter[reconcile.Request])(nil)

// When takes a token and returns how long to wait for it.
func (b *BucketRateLimiter[T]) When(T) time.Duration {
	now := b.clock.Now()
	return b.limiter.ReserveN(now, 1).DelayFrom(now)
}

// NumRequeues is always 0: the bucket does not track keys.
func (b *BucketRateLimiter[T]) NumRequeues(T) int { return 0 }

// Forget does nothing: the bucket does not track keys.
func (b *BucketRateLimiter[T]) Forget(T) {}
