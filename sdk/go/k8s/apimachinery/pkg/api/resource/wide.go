package resource

import (
	"math"
	"math/big"
	"strconv"
)

// wide is an amount past int64Amount: u × 10^-scale, as the gopkg.in/inf.v0 Dec that
// apimachinery keeps such amounts in (scale counts digits after the point). Only the methods
// that compute with a wide quantity reach this file, so a module that only reads and writes
// quantities links no math/big.
type wide struct {
	u     big.Int
	scale int32
}

// wideText is a wide as a Quantity holds it: were a big.Int in Quantity's type, every module
// with a Quantity field would link math/big's String and Format, which reflection may call
// (0.25 MB of wasm).
type wideText struct {
	digits string // u in decimal; "" for none
	scale  int32
}

func (t wideText) wide() *wide {
	w := &wide{scale: t.scale}
	if _, ok := w.u.SetString(t.digits, 10); !ok {
		panic("resource: a wide amount of digits " + strconv.Quote(t.digits))
	}
	return w
}

// magnitude is t's digits without their sign.
func (t wideText) magnitude() []byte { return []byte(t.digits[max(0, -t.sign()):]) }

func (t wideText) sign() int {
	switch {
	case t.digits[0] == '-':
		return -1
	case t.digits == "0":
		return 0
	}
	return 1
}

func (w *wide) text() wideText { return wideText{digits: w.u.String(), scale: w.scale} }

// No package-level big.Int: its initialization would link math/big into every module.

func wideOf(a int64Amount) *wide {
	w := &wide{scale: -int32(a.scale)}
	w.u.SetInt64(a.value)
	return w
}

func (w *wide) sign() int { return w.u.Sign() }

// aligned is x and y's unscaled values at the larger of their scales, and that scale.
func aligned(x, y *wide) (a, b *big.Int, scale int32) {
	a, b, scale = &x.u, &y.u, x.scale
	switch {
	case x.scale < y.scale:
		a, scale = new(big.Int).Mul(a, pow10Big(y.scale-x.scale)), y.scale
	case x.scale > y.scale:
		b = new(big.Int).Mul(b, pow10Big(x.scale-y.scale))
	}
	return a, b, scale
}

func (w *wide) cmp(y *wide) int {
	a, b, _ := aligned(w, y)
	return a.Cmp(b)
}

func (w *wide) add(y *wide) *wide {
	a, b, scale := aligned(w, y)
	r := &wide{scale: scale}
	r.u.Add(a, b)
	return r
}

func (w *wide) neg() *wide {
	r := &wide{scale: w.scale}
	r.u.Neg(&w.u)
	return r
}

func (w *wide) mul(y int64) *wide {
	r := &wide{scale: w.scale}
	r.u.Mul(&w.u, big.NewInt(y))
	return r
}

// round is w at scale (digits after the point), rounded away from zero.
func (w *wide) round(scale int32) *wide {
	r := &wide{scale: scale}
	if w.scale <= scale {
		r.u.Mul(&w.u, pow10Big(scale-w.scale))
		return r
	}
	var rem big.Int
	r.u.QuoRem(&w.u, pow10Big(w.scale-scale), &rem)
	if rem.Sign() != 0 {
		r.u.Add(&r.u, big.NewInt(int64(w.u.Sign())))
	}
	return r
}

// asScale is w rounded away from zero to units of 10^scale, and whether that is exact.
func (w *wide) asScale(scale Scale) (*wide, bool) {
	r := w.round(-int32(scale))
	return r, r.cmp(w) == 0
}

// scaledValue is w in units of 10^scale as an int64, as apimachinery's scaledValue computes
// it, overflow and all.
func (w *wide) scaledValue(scale Scale) int64 {
	dif := int(w.scale) + int(scale)
	switch {
	case dif == 0:
		return w.u.Int64()
	case dif < 0:
		return w.u.Int64() * int64(math.Pow10(-dif))
	case w.u.Cmp(big.NewInt(mostPositive)) < 0 && dif < 19:
		divide := int64(math.Pow10(dif))
		v := w.u.Int64()
		if v%divide != 0 {
			return v/divide + 1
		}
		return v / divide
	}
	var q, r big.Int
	q.DivMod(&w.u, pow10Big(int32(dif)), &r)
	if r.Sign() != 0 {
		return q.Int64() + 1
	}
	return q.Int64()
}

func (w *wide) float64() float64 {
	base, _ := strconv.ParseFloat(w.u.String(), 64)
	if w.scale == 0 {
		return base
	}
	return base * math.Pow10(int(-w.scale))
}

func pow10Big(n int32) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}
