package resource

// Reading, writing and comparing a wide quantity is done here on its decimal digits, without
// math/big: linking math/big into every module with a Quantity field, or every one that calls
// Equal (as controllerutil.CreateOrUpdate does through equality.Semantic), would cost it
// 0.25 MB of wasm.

// readWideText reads the amount of a quantity's text that ParseQuantity found past
// int64Amount as apimachinery's inf.Dec holds it: rounded away from zero to nano, and a
// BinarySI amount capped at the largest int64.
func readWideText(p *scanned, format Format) wideText {
	base, exponent, _, _ := interpretSuffix(p.suffix)
	var digits []byte
	var scale int32
	point := false
	for i := 0; i < len(p.value); i++ {
		switch c := p.value[i]; {
		case c == '.':
			point = true
		case isDigit(c):
			digits = append(digits, c)
			if point {
				scale++
			}
		}
	}
	digits = trimLeadingZeros(digits)
	if base == 10 {
		scale -= exponent
	} else {
		for range exponent {
			digits = double(digits)
		}
	}
	if len(digits) > 0 {
		digits, scale = roundUpText(digits, scale, -int32(Nano))
		if format == BinarySI && cmpText(digits, scale, maxDigitsText, 0) > 0 {
			digits, scale = []byte(maxDigitsText), 0
		}
	}
	t := wideText{digits: string(digits), scale: scale}
	switch {
	case len(digits) == 0:
		t.digits = "0"
	case !p.positive:
		t.digits = "-" + t.digits
	}
	return t
}

const maxDigitsText = "9223372036854775807"

// cmpWideText compares two amounts exactly.
func cmpWideText(a, b wideText) int {
	sa, sb := a.sign(), b.sign()
	if sa != sb || sa == 0 {
		return cmpInt64(int64(sa), int64(sb))
	}
	return cmpText(a.magnitude(), a.scale, string(b.magnitude()), b.scale) * sa
}

// cmpText compares the magnitudes a × 10^-as and b × 10^-bs, whose digits have no leading
// zeros.
func cmpText(a []byte, as int32, b string, bs int32) int {
	for len(a) > 0 && a[len(a)-1] == '0' {
		a, as = a[:len(a)-1], as-1
	}
	for len(b) > 0 && b[len(b)-1] == '0' {
		b, bs = b[:len(b)-1], bs-1
	}
	switch {
	case len(a) == 0 || len(b) == 0:
		return cmpInt64(int64(len(a)), int64(len(b)))
	case int64(len(a))-int64(as) != int64(len(b))-int64(bs):
		return cmpInt64(int64(len(a))-int64(as), int64(len(b))-int64(bs))
	}
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return cmpInt64(int64(a[i]), int64(b[i]))
		}
	}
	return cmpInt64(int64(len(a)), int64(len(b)))
}

// roundUpText is digits × 10^-scale at the given scale, rounded away from zero.
func roundUpText(digits []byte, scale, to int32) ([]byte, int32) {
	if scale <= to {
		for ; scale < to; scale++ {
			digits = append(digits, '0')
		}
		return digits, to
	}
	drop := int(scale - to)
	inexact := false
	if drop >= len(digits) {
		inexact = len(digits) > 0
		digits = digits[:0]
	} else {
		for _, c := range digits[len(digits)-drop:] {
			inexact = inexact || c != '0'
		}
		digits = digits[:len(digits)-drop]
	}
	if inexact {
		digits = increment(digits)
	}
	return trimLeadingZeros(digits), to
}

func double(digits []byte) []byte {
	out := make([]byte, len(digits)+1)
	carry := byte(0)
	for i := len(digits) - 1; i >= 0; i-- {
		d := (digits[i]-'0')*2 + carry
		out[i+1], carry = '0'+d%10, d/10
	}
	out[0] = '0' + carry
	return trimLeadingZeros(out)
}

func increment(digits []byte) []byte {
	for i := len(digits) - 1; i >= 0; i-- {
		if digits[i] != '9' {
			digits[i]++
			return digits
		}
		digits[i] = '0'
	}
	return append([]byte{'1'}, digits...)
}

func trimLeadingZeros(digits []byte) []byte {
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
	}
	return digits
}

// canonicalText is CanonicalizeBytes for an amount's digits. keep1024: write a BinarySI
// amount's digits without dividing them by 1024.
func canonicalText(t wideText, format Format, keep1024 bool, out []byte) (number, suffix []byte) {
	sign := t.sign()
	if sign == 0 {
		return append(out, '0'), nil
	}
	digits, scale := t.magnitude(), t.scale
	switch format {
	case DecimalExponent, DecimalSI:
	case BinarySI:
		if cmpText(digits, scale, "1024", 0) < 0 {
			format = DecimalSI
		} else if r, _ := roundUpText(append([]byte(nil), digits...), scale, 0); cmpText(r, 0, string(digits), scale) == 0 {
			digits, scale = r, 0
		} else {
			format = DecimalSI
		}
	default:
		format = DecimalExponent
	}
	if sign < 0 {
		out = append(out, '-')
	}
	if format == BinarySI {
		var times int32
		for !keep1024 {
			q, r := divideText(digits, 1024)
			if r != 0 {
				break
			}
			digits = q
			times++
		}
		return append(out, digits...), constructSuffix(2, times*10, format)
	}
	exponent := -scale
	for len(digits) > 1 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		exponent++
	}
	out = append(out, digits...)
	for exponent%3 != 0 {
		out = append(out, '0')
		exponent--
	}
	return out, constructSuffix(10, exponent, format)
}
