// Package resource holds Quantity, an amount of a resource (CPU, memory) in Kubernetes'
// notation: 100m, 1.5Gi, 2e3.
//
// It is k8s.io/apimachinery's Quantity without k8s.io: the same methods compute the same
// digits (Cmp, Equal, Add, Sub, Mul, Neg, RoundUp, Value, MilliValue, ScaledValue, AsInt64,
// AsApproximateFloat64, String), and the tests compare the two on random quantities. Not here:
// AsDec, ToDec and NewDecimalQuantity (they speak gopkg.in/inf.v0), QuantityValue (a pflag
// flag), and the protobuf and CBOR encodings.
//
// Nearly every quantity is an int64 times a power of ten. Any other, such as
// 123456789012345678901234 or 1.5Gi, is held as its decimal digits: reading, writing and
// comparing it works on them, and the methods that compute with it (Add, Sub, Mul, Value...)
// use math/big, which a module links only if it calls them (0.22 MB of wasm).
package resource
