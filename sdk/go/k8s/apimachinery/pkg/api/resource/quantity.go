package resource

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/wasmrec/wasmrec/sdk/go/codec"
)

// Quantity is an amount in Kubernetes' notation: a decimal number and a suffix, 100m, 1.5Gi,
// 2e3. It computes as k8s.io/apimachinery's Quantity does, to the same digits (Cmp, Add, Sub,
// Mul, Value, MilliValue, String...), which the tests check on random quantities.
//
// Format is how String writes it: DecimalSI (1.5k is 1500), BinarySI (1Ki is 1024),
// DecimalExponent (1e3). ParseQuantity takes it from the suffix.
type Quantity struct {
	i int64Amount // the amount, unless x holds it
	x *extra      // what few quantities need; never changed, so copies share it
	Format
}

// extra is what a Quantity holds beyond an int64 amount, for the few that need it: 40 bytes a
// Quantity instead of 72, which a typed object decodes and keeps many of.
type extra struct {
	// s is the text String gives, where it is not the one it computes: apimachinery gives back
	// a text it read (+100m, 0100m, 1.500, 1E3) when its digits look canonical.
	s string
	w wideText // the amount, if past int64Amount ("" digits: none)
}

// Format is how a quantity is written.
type Format string

// The formats of a quantity.
const (
	DecimalExponent = Format("DecimalExponent") // 12e6
	BinarySI        = Format("BinarySI")        // 12Mi (12 × 2^20)
	DecimalSI       = Format("DecimalSI")       // 12M (12 × 10^6)
)

// The errors of ParseQuantity, which wraps them with the text it was given.
var (
	ErrFormatWrong = errors.New("not a number with an optional suffix (Ki Mi Gi Ti Pi Ei, n u m k M G T P E, or e and an exponent)")
	ErrNumeric     = errors.New("unable to parse numeric part of quantity")
	ErrSuffix      = errors.New("unable to parse quantity's suffix")
)

// ParseQuantity reads s: a signed decimal number, then a suffix: Ki Mi Gi Ti Pi Ei, n u m k M
// G T P E, or e/E and an exponent. An amount finer than nano is rounded up to it, as
// apimachinery does.
func ParseQuantity(s string) (Quantity, error) {
	var q Quantity
	if err := q.parse(s); err != nil {
		return Quantity{}, fmt.Errorf("quantity %q: %w", s, err)
	}
	return q, nil
}

// parse sets q, a zero Quantity, to str's quantity.
func (q *Quantity) parse(str string) error {
	if str == "" {
		return ErrFormatWrong
	}
	if str == "0" {
		q.Format = DecimalSI
		return nil
	}
	var p scanned
	if !scanQuantity(str, &p) {
		return ErrFormatWrong
	}
	_, exponent, format, ok := interpretSuffix(p.suffix)
	if !ok {
		return ErrSuffix
	}
	// The int64 reading of apimachinery's ParseQuantity, where it applies.
	var precision, scale int32
	mantissa := int64(1)
	switch format {
	case DecimalExponent, DecimalSI:
		scale = exponent
		precision = maxDigits - int32(len(p.num)+len(p.denom))
	case BinarySI:
		if exponent >= 0 && p.denom == "" {
			mantissa <<= uint64(exponent)
			// 1Mi (2^20) has about 6 digits of decimal precision. (apimachinery computes
			// exponent*3/10 in float32, which for 10, 20... 60 is this exactly.)
			precision = 15 - int32(len(p.num)) - exponent*3/10 - 1
		} else {
			precision = -1
		}
	}
	if precision >= 0 {
		scale -= int32(len(p.denom))
		if scale >= int32(Nano) {
			// At most 18 digits: they fit.
			var v int64
			for _, digits := range [2]string{p.num, p.denom} {
				for i := 0; i < len(digits); i++ {
					v = v*10 + int64(digits[i]-'0')
				}
			}
			if result, ok := mulInt64(v, mantissa); ok {
				if !p.positive {
					result = -result
				}
				q.i, q.Format = int64Amount{value: result, scale: Scale(scale)}, format
				// apimachinery keeps the text where its digits look canonical, and String gives
				// it back. Unless written as String writes it (no sign but -, zeros before or
				// point, and no exponent), it is kept here too.
				var kept bool
				switch format {
				case BinarySI:
					kept = exponent%10 == 0 && v&0x07 != 0
				default:
					kept = scale%3 == 0 && !endsInZeros(p.num, p.denom) && p.num[0] != '0'
				}
				written := len(str) == len(p.num)+len(p.suffix)+1-btoi(p.positive) && str[0] != '+'
				if kept && (!written || format == DecimalExponent) {
					q.x = &extra{s: str}
				}
				return nil
			}
		}
	}
	if !hasDigit(p.value) {
		return ErrNumeric
	}
	w := readWideText(&p, format)
	q.x = &extra{w: w}
	if format == BinarySI && w.sign() != 0 && cmpText(w.magnitude(), w.scale, "1", 0) < 0 {
		format = DecimalSI // as apimachinery writes a BinarySI amount below 1
	}
	q.Format = format
	return nil
}

// endsInZeros reports whether the digits of a, then b, end in 000.
func endsInZeros(a, b string) bool {
	zeros := 0
	for _, digits := range [2]string{b, a} {
		for i := len(digits) - 1; i >= 0; i-- {
			if digits[i] != '0' {
				return false
			}
			if zeros++; zeros == 3 {
				return true
			}
		}
	}
	return false
}

// MustParse is ParseQuantity that panics on a bad quantity: for literals.
func MustParse(s string) Quantity {
	q, err := ParseQuantity(s)
	if err != nil {
		panic(err)
	}
	return q
}

// NewQuantity is value in units.
func NewQuantity(value int64, format Format) *Quantity {
	return &Quantity{i: int64Amount{value: value}, Format: format}
}

// NewMilliQuantity is value in thousandths.
func NewMilliQuantity(value int64, format Format) *Quantity {
	return &Quantity{i: int64Amount{value: value, scale: Milli}, Format: format}
}

// NewScaledQuantity is value × 10^scale, DecimalSI.
func NewScaledQuantity(value int64, scale Scale) *Quantity {
	return &Quantity{i: int64Amount{value: value, scale: scale}, Format: DecimalSI}
}

// scanned is a quantity's text in parts, as apimachinery's parseQuantityString splits it.
type scanned struct {
	positive                  bool
	value, num, denom, suffix string
}

// scanQuantity splits s into sign, number (integer and fraction digits, without leading zeros)
// and suffix. Like apimachinery's, it takes a bare sign or point for zero.
func scanQuantity(s string, p *scanned) (ok bool) {
	p.positive = true
	pos, end := 0, len(s)
	if pos < end {
		switch s[0] {
		case '-':
			p.positive = false
			pos++
		case '+':
			pos++
		}
	}
	for pos < end && s[pos] == '0' {
		pos++
	}
	if pos == end {
		p.num, p.value = "0", "0"
		return true
	}
	start := pos
	for pos < end && isDigit(s[pos]) {
		pos++
	}
	p.num = s[start:pos]
	if pos == end {
		p.value = s
		return true
	}
	if p.num == "" {
		p.num = "0"
	}
	if s[pos] == '.' {
		pos++
		start = pos
		for pos < end && isDigit(s[pos]) {
			pos++
		}
		p.denom = s[start:pos]
		if pos == end {
			p.value = s
			return true
		}
	}
	p.value = s[:pos]
	start = pos
	for pos < end && isSuffixLetter(s[pos]) {
		pos++
	}
	if pos < end && (s[pos] == '-' || s[pos] == '+') {
		pos++
	}
	for pos < end && isDigit(s[pos]) {
		pos++
	}
	p.suffix = s[start:]
	return pos == end
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// isSuffixLetter reports one of eEinumkKMGTP.
func isSuffixLetter(c byte) bool {
	switch c {
	case 'e', 'E', 'i', 'n', 'u', 'm', 'k', 'K', 'M', 'G', 'T', 'P':
		return true
	}
	return false
}

// hasDigit reports a digit in s.
func hasDigit(s string) bool {
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			return true
		}
	}
	return false
}

// suffixes are the named suffixes: their base and power.
var suffixes = [...]struct {
	name           string
	base, exponent int32
}{
	{"", 10, 0}, {"n", 10, -9}, {"u", 10, -6}, {"m", 10, -3}, {"k", 10, 3}, {"M", 10, 6}, {"G", 10, 9},
	{"T", 10, 12}, {"P", 10, 15}, {"E", 10, 18},
	{"Ki", 2, 10}, {"Mi", 2, 20}, {"Gi", 2, 30}, {"Ti", 2, 40}, {"Pi", 2, 50}, {"Ei", 2, 60},
}

// interpretSuffix is a suffix's base, power and format.
func interpretSuffix(s string) (base, exponent int32, format Format, ok bool) {
	// The common suffixes first, without a search.
	switch s {
	case "":
		return 10, 0, DecimalSI, true
	case "m":
		return 10, -3, DecimalSI, true
	case "Mi":
		return 2, 20, BinarySI, true
	case "Gi":
		return 2, 30, BinarySI, true
	}
	for _, x := range suffixes {
		if x.name == s {
			if x.base == 2 {
				return 2, x.exponent, BinarySI, true
			}
			return 10, x.exponent, DecimalSI, true
		}
	}
	if len(s) > 1 && (s[0] == 'e' || s[0] == 'E') {
		v, err := strconv.ParseInt(s[1:], 10, 64)
		if err != nil {
			return 0, 0, DecimalExponent, false
		}
		return 10, int32(v), DecimalExponent, true // truncated, as apimachinery does
	}
	return 0, 0, DecimalExponent, false
}

// constructSuffix is the suffix String writes for base^exponent in format; nil where none is
// known (apimachinery then writes the digits alone).
func constructSuffix(base, exponent int32, format Format) []byte {
	if format == DecimalExponent {
		if base != 10 || exponent == 0 {
			return nil
		}
		return strconv.AppendInt([]byte{'e'}, int64(exponent), 10)
	}
	for _, x := range suffixes {
		if x.base == base && x.exponent == exponent && (x.base == 2) == (format == BinarySI) {
			return []byte(x.name)
		}
	}
	return nil
}

// String is the quantity in its canonical form (1.5Gi is 1536Mi, 1000m is 1), as
// apimachinery writes it; "0" for the zero Quantity.
func (q *Quantity) String() string {
	if q == nil {
		return "<nil>"
	}
	return q.text()
}

// text is String's text.
func (q *Quantity) text() string {
	if q.x != nil && q.x.s != "" {
		return q.x.s
	}
	var buf [24]byte
	number, suffix := q.CanonicalizeBytes(buf[:0])
	return string(append(number, suffix...))
}

// CanonicalizeBytes appends the quantity's canonical number to out and returns it with its
// suffix: String is the two together.
func (q *Quantity) CanonicalizeBytes(out []byte) (result, suffix []byte) {
	// apimachinery writes math.MinInt64 units without a binary suffix: its int64 path cannot
	// negate them to divide by 1024.
	v, _ := q.i.asScaledInt64(0)
	return canonicalText(q.wideTextOf(), q.Format, !q.isWide() && v == mostNegative, out)
}

func (q *Quantity) isWide() bool { return q.x != nil && q.x.w.digits != "" }

// wideAmount is the amount of a quantity as a wide.
func (q *Quantity) wideAmount() *wide { return q.wideTextOf().wide() }

// wideTextOf is the amount of a quantity as a wideText, as apimachinery's inf.Dec holds it.
func (q *Quantity) wideTextOf() wideText {
	if q.isWide() {
		return q.x.w
	}
	return wideText{digits: strconv.FormatInt(q.i.value, 10), scale: -int32(q.i.scale)}
}

// becomeWide makes q hold its amount as a wide, as apimachinery's AsDec does (AsInt64 then
// says false).
func (q *Quantity) becomeWide() {
	if !q.isWide() {
		x := &extra{w: q.wideTextOf()}
		if q.x != nil {
			x.s = q.x.s // a text String gives back stays
		}
		q.x, q.i = x, int64Amount{}
	}
}

// toWide makes q wide, and returns its amount.
func (q *Quantity) toWide() *wide {
	q.becomeWide()
	return q.x.w.wide()
}

// setWide sets q to w, in format; String computes its text anew.
func (q *Quantity) setWide(w *wide, format Format) {
	q.i, q.x, q.Format = int64Amount{}, &extra{w: w.text()}, format
}

// IsZero reports a quantity of zero (the zero Quantity is one).
func (q *Quantity) IsZero() bool { return q.Sign() == 0 }

// Sign is -1, 0 or 1 as the quantity is negative, zero or positive.
func (q *Quantity) Sign() int {
	if q.isWide() {
		return q.x.w.sign()
	}
	return q.i.sign()
}

// Cmp is -1, 0 or 1 as q is less than, equal to or greater than y.
func (q *Quantity) Cmp(y Quantity) int {
	if !q.isWide() && !y.isWide() {
		return q.i.cmp(y.i)
	}
	q.becomeWide()
	return cmpWideText(q.x.w, y.wideTextOf())
}

// CmpInt64 is Cmp with an integer.
func (q *Quantity) CmpInt64(y int64) int {
	if q.isWide() {
		return cmpWideText(q.wideTextOf(), wideText{digits: strconv.FormatInt(y, 10)})
	}
	return q.i.cmp(int64Amount{value: y})
}

// Equal reports q and v of the same amount, however written: 1Gi equals 1024Mi.
func (q Quantity) Equal(v Quantity) bool { return q.Cmp(v) == 0 }

// Add adds y to q. A zero q takes y's Format.
func (q *Quantity) Add(y Quantity) {
	if !q.isWide() && !y.isWide() {
		if q.i.value == 0 {
			q.Format = y.Format
		}
		if q.i.add(y.i) {
			q.x = nil
			return
		}
	} else if q.IsZero() {
		q.Format = y.Format
	}
	w := y.wideAmount()
	q.setWide(q.toWide().add(w), q.Format)
}

// Sub subtracts y from q. A zero q takes y's Format.
func (q *Quantity) Sub(y Quantity) {
	if q.IsZero() {
		q.Format = y.Format
	}
	if !q.isWide() && !y.isWide() && q.i.add(int64Amount{value: -y.i.value, scale: y.i.scale}) {
		q.x = nil
		return
	}
	w := y.wideAmount()
	q.setWide(q.toWide().add(w.neg()), q.Format)
}

// Mul multiplies q by y and reports whether the product's digits fit an int64.
func (q *Quantity) Mul(y int64) bool {
	if !q.isWide() && q.i.mul(y) {
		q.x = nil
		return true
	}
	w := q.toWide().mul(y)
	q.setWide(w, q.Format)
	return w.u.IsInt64()
}

// Neg negates q.
func (q *Quantity) Neg() {
	if !q.isWide() {
		q.i.value = -q.i.value
		q.x = nil
		return
	}
	q.setWide(q.toWide().neg(), q.Format)
}

// RoundUp rounds q away from zero to a multiple of 10^scale and reports whether it was one
// already.
func (q *Quantity) RoundUp(scale Scale) bool {
	if q.isWide() {
		w, exact := q.toWide().asScale(scale)
		q.setWide(w, q.Format)
		return exact
	}
	if q.i.scale >= scale {
		return true
	}
	i, exact := q.i.asScale(scale)
	q.i, q.x = i, nil
	return exact
}

// AsInt64 is the quantity as an int64, if it is an integer that fits (and was not computed
// past one).
func (q *Quantity) AsInt64() (int64, bool) {
	if q.isWide() {
		return 0, false
	}
	return q.i.asInt64()
}

// Value is the quantity in units, rounded up: 1500m is 2.
func (q *Quantity) Value() int64 { return q.ScaledValue(0) }

// MilliValue is the quantity in thousandths, rounded up.
func (q *Quantity) MilliValue() int64 { return q.ScaledValue(Milli) }

// ScaledValue is the quantity in units of 10^scale, rounded up; 0 if it does not fit an int64.
func (q *Quantity) ScaledValue(scale Scale) int64 {
	if q.isWide() {
		w := q.wideAmount()
		return w.scaledValue(scale)
	}
	v, _ := q.i.asScaledInt64(scale)
	return v
}

// AsApproximateFloat64 is the quantity as the nearest float64, or about it.
func (q *Quantity) AsApproximateFloat64() float64 {
	if q.isWide() {
		w := q.wideAmount()
		return w.float64()
	}
	if q.i.scale == 0 {
		return float64(q.i.value)
	}
	return float64(q.i.value) * math.Pow10(int(q.i.scale))
}

// Set sets q to value units.
func (q *Quantity) Set(value int64) { q.SetScaled(value, 0) }

// SetMilli sets q to value thousandths.
func (q *Quantity) SetMilli(value int64) { q.SetScaled(value, Milli) }

// SetScaled sets q to value × 10^scale.
func (q *Quantity) SetScaled(value int64, scale Scale) {
	q.i, q.x = int64Amount{value: value, scale: scale}, nil
}

// DecodeJSON reads a quantity written as a string or a number; null is the zero Quantity.
func (q *Quantity) DecodeJSON(d *codec.Decoder) {
	if d.Null() {
		*q = Quantity{}
		return
	}
	var s string
	if c := d.Next(); c == '"' {
		codec.ReadString(&s, d)
	} else if c == '-' || c >= '0' && c <= '9' {
		s = string(d.Raw())
	} else {
		codec.ReadString(&s, d) // its error
		return
	}
	if d.Err() != nil {
		return
	}
	*q = Quantity{}
	if err := q.parse(trimSpace(s)); err != nil {
		*q = Quantity{}
		d.Fail(fmt.Errorf("quantity %q: %w", s, err))
	}
}

// trimSpace is strings.TrimSpace for the white space JSON allows, which is smaller.
func trimSpace(s string) string {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// EncodeJSON writes the quantity as String does.
func (q *Quantity) EncodeJSON(e *codec.Encoder) { e.String(q.text()) }

// DeepCopyInto copies q into out.
func (q *Quantity) DeepCopyInto(out *Quantity) { *out = *q }

// DeepCopy is a copy of q (what it holds beyond an int64 amount is never changed: copies share it).
func (q Quantity) DeepCopy() Quantity { return q }

// MarshalJSON and UnmarshalJSON give encoding/json the same JSON as the generated code
// (MarshalJSON calls EncodeJSON directly: see metav1.Time's).
func (q Quantity) MarshalJSON() ([]byte, error) {
	var e codec.Encoder
	q.EncodeJSON(&e)
	return e.Bytes()
}

func (q *Quantity) UnmarshalJSON(b []byte) error { return codec.Unmarshal(b, q) }
