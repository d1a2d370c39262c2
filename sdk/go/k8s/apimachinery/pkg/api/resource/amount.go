package resource

// Scale is the power of ten of an amount: 3 is thousands, -3 thousandths.
type Scale int32

// The scales of the decimal SI suffixes.
const (
	Nano  Scale = -9
	Micro Scale = -6
	Milli Scale = -3
	Kilo  Scale = 3
	Mega  Scale = 6
	Giga  Scale = 9
	Tera  Scale = 12
	Peta  Scale = 15
	Exa   Scale = 18
)

// MaxMilliValue is the largest quantity whose MilliValue fits an int64.
const MaxMilliValue = int64(((1 << 63) - 1) / 1000)

const (
	mostPositive = 1<<63 - 1
	mostNegative = -mostPositive - 1
	// maxDigits is how many digits (before and after the point) a number may have for
	// ParseQuantity to read it as an int64 amount.
	maxDigits = 18
)

// int64Amount is value × 10^scale, the form of nearly every quantity. Its operations report
// false where the result does not fit, and the caller goes on with a wide amount; each
// rounds as k8s.io/apimachinery's does, which the tests compare it with.
type int64Amount struct {
	value int64
	scale Scale
}

func (a int64Amount) sign() int {
	switch {
	case a.value > 0:
		return 1
	case a.value < 0:
		return -1
	}
	return 0
}

// asInt64 is the amount as an integer, if it is one that fits.
func (a int64Amount) asInt64() (int64, bool) {
	switch {
	case a.scale == 0:
		return a.value, true
	case a.scale < 0:
		return 0, false
	}
	return scaleUp(a.value, a.scale)
}

// asScaledInt64 is the amount in units of 10^scale, rounded away from zero; ok is false (and
// the result 0) if it does not fit.
func (a int64Amount) asScaledInt64(scale Scale) (int64, bool) {
	if a.scale < scale {
		v, _ := scaleDown(a.value, scale-a.scale)
		return v, true
	}
	return scaleUp(a.value, a.scale-scale)
}

// asScale is the amount at scale or coarser, rounded away from zero, and whether that is exact.
func (a int64Amount) asScale(scale Scale) (int64Amount, bool) {
	if a.scale >= scale {
		return a, true
	}
	v, exact := scaleDown(a.value, scale-a.scale)
	return int64Amount{value: v, scale: scale}, exact
}

// cmp compares two amounts exactly.
func (a int64Amount) cmp(b int64Amount) int {
	if a.scale == b.scale {
		return cmpInt64(a.value, b.value)
	}
	if sa, sb := a.sign(), b.sign(); sa != sb || sa == 0 {
		return cmpInt64(int64(sa), int64(sb))
	}
	if a.scale < b.scale {
		return -b.cmp(a)
	}
	// a has the coarser scale: b's value divided by 10^d is at a's.
	d := a.scale - b.scale
	if d < maxDigits {
		q, r := b.value/pow10(int(d)), b.value%pow10(int(d))
		switch {
		case q != a.value:
			return cmpInt64(a.value, q)
		case r > 0:
			return -1
		case r < 0:
			return 1
		}
		return 0
	}
	// |a| × 10^d with d >= 18 and a non-zero is at least 10^18; b's magnitude is below 10^19.
	ma, mb := magnitude(a.value), magnitude(b.value)
	larger := d > maxDigits || ma >= 10 || ma*uint64(pow10(maxDigits)) > mb
	equal := d == maxDigits && ma < 10 && ma*uint64(pow10(maxDigits)) == mb
	switch {
	case equal:
		return 0
	case larger == (a.value > 0):
		return 1
	}
	return -1
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func magnitude(v int64) uint64 {
	if v < 0 {
		return uint64(-(v + 1)) + 1
	}
	return uint64(v)
}

// add sets a to a + b.
func (a *int64Amount) add(b int64Amount) bool {
	switch {
	case b.value == 0:
		return true
	case a.value == 0:
		*a = b
		return true
	case a.scale == b.scale:
		c, ok := addInt64(a.value, b.value)
		if !ok {
			return false
		}
		a.value = c
	case a.scale > b.scale:
		c, ok := scaleUp(a.value, a.scale-b.scale)
		if !ok {
			return false
		}
		if c, ok = addInt64(c, b.value); !ok {
			return false
		}
		a.value, a.scale = c, b.scale
	default:
		c, ok := scaleUp(b.value, b.scale-a.scale)
		if !ok {
			return false
		}
		if c, ok = addInt64(a.value, c); !ok {
			return false
		}
		a.value = c
	}
	return true
}

// mul sets a to a × b. Like apimachinery's, it also refuses a product that fits but whose
// value at scale 0 would not.
func (a *int64Amount) mul(b int64) bool {
	switch {
	case a.value == 0:
		return true
	case b == 0:
		*a = int64Amount{}
		return true
	}
	c, ok := mulInt64(a.value, b)
	if !ok {
		return false
	}
	switch {
	case a.scale > 0:
		_, ok = scaleUp(c, a.scale)
	case a.scale < 0:
		_, ok = scaleDown(c, -a.scale)
	}
	if ok {
		a.value = c
	}
	return ok
}

// divideText divides a decimal number's digits by d, returning the quotient's digits (without
// leading zeros) and the remainder.
func divideText(digits []byte, d uint64) ([]byte, uint64) {
	var q []byte
	var r uint64
	for _, c := range digits {
		r = r*10 + uint64(c-'0')
		if len(q) > 0 || r >= d {
			q = append(q, byte('0'+r/d))
		}
		r %= d
	}
	if len(q) == 0 {
		q = append(q, '0')
	}
	return q, r
}

func addInt64(a, b int64) (int64, bool) {
	c := a + b
	switch {
	case a > 0 && b > 0 && c < 0:
		return 0, false
	case a < 0 && b < 0 && c >= 0:
		return 0, false
	}
	return c, true
}

func mulInt64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 || a == 1 || b == 1 {
		return a * b, true
	}
	if a == mostNegative || b == mostNegative {
		return 0, false
	}
	c := a * b
	return c, c/b == a
}

// scaleUp is v × 10^by and whether it fits. Like apimachinery's positiveScaleInt64, for by
// of 1, 2, 3, 6 or 9 it multiplies once and returns the product even if it overflowed (which
// ScaledValue and AsInt64 then return); otherwise 0.
func scaleUp(v int64, by Scale) (int64, bool) {
	switch by {
	case 0:
		return v, true
	case 1, 2, 3, 6, 9:
		m := pow10(int(by))
		if v == 0 || v == 1 {
			return v * m, true
		}
		if v == mostNegative {
			return 0, false
		}
		c := v * m
		return c, c/m == v
	}
	for ; by > 0; by-- {
		if v == 0 || v == 1 {
			v *= 10
			continue
		}
		if v == mostNegative {
			return 0, false
		}
		c := v * 10
		if c/10 != v {
			return 0, false
		}
		v = c
	}
	return v, true
}

// scaleDown is v / 10^by rounded away from zero, and whether nothing was rounded.
func scaleDown(v int64, by Scale) (int64, bool) {
	r := v
	fraction := false
	for ; by > 0; by-- {
		if r%10 != 0 {
			fraction = true
		}
		r /= 10
		if r == 0 {
			if !fraction {
				return 0, true
			}
			if v > 0 {
				return 1, false
			}
			return -1, false
		}
	}
	switch {
	case !fraction:
		return r, true
	case v > 0:
		return r + 1, false
	}
	return r - 1, false
}

func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}

// removeFactors divides v by base while it divides evenly, counting how often.
func removeFactors(v int64, base int64) (int64, int32) {
	negative := v < 0
	if negative {
		v = -v
	}
	var times int32
	for v >= base && v%base == 0 {
		v /= base
		times++
	}
	if negative {
		v = -v
	}
	return v, times
}
