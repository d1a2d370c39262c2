package jsonv

// Text reads a JSON document one token at a time, for decoders that know the shape they read
// (the generated ones of package codec): the same grammar, unquoting and number reading as
// Decode, without building values.
//
// The strings it returns share one copy of the document, made at the first string, so that
// reading one costs no allocation of its own: a string read keeps that copy alive.
type Text struct{ d decoder }

// NewText returns a Text at the start of data.
func NewText(data []byte) *Text { return &Text{d: decoder{data: data}} }

// Pos is the offset of the next byte to read.
func (t *Text) Pos() int { return t.d.pos }

// SetPos moves to an offset: past the end stops the reading.
func (t *Text) SetPos(pos int) { t.d.pos = pos }

// Peek skips white space and returns the next byte without reading it, or 0 at the end.
func (t *Text) Peek() byte {
	t.d.space()
	if t.d.pos >= len(t.d.data) {
		return 0
	}
	return t.d.data[t.d.pos]
}

// String reads the string whose opening quote is the next byte.
func (t *Text) String() (string, bool) { return t.d.str() }

// Number reads the number at the next byte and returns its text, whether it is an integer (no
// fraction or exponent), and, for an integer of up to 19 digits, their value without the sign.
func (t *Text) Number() (text []byte, integer bool, n uint64, ok bool) {
	start := t.d.pos
	end, integer, digits, n, ok := t.d.numberEnd()
	if !ok {
		return nil, false, 0, false
	}
	t.d.pos = end
	if digits > 19 {
		n = 0
	}
	return t.d.data[start:end], integer, n, true
}

// Skip reads one value of any kind, checking its grammar, and keeps nothing of it.
func (t *Text) Skip() bool { return t.d.skip() }

// skip reads a value without building it. depth counts as in value.
func (d *decoder) skip() bool {
	d.space()
	if d.pos >= len(d.data) {
		return false
	}
	switch c := d.data[d.pos]; c {
	case '{', '[':
		if d.depth++; d.depth > maxDepth {
			return false
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		d.pos++
		d.space()
		if d.pos < len(d.data) && d.data[d.pos] == end {
			d.pos++
			d.depth--
			return true
		}
		for {
			if c == '{' {
				d.space()
				if d.pos >= len(d.data) || d.data[d.pos] != '"' || !d.skipString() {
					return false
				}
				d.space()
				if d.pos >= len(d.data) || d.data[d.pos] != ':' {
					return false
				}
				d.pos++
			}
			if !d.skip() {
				return false
			}
			d.space()
			if d.pos >= len(d.data) {
				return false
			}
			switch d.data[d.pos] {
			case ',':
				d.pos++
				continue
			case end:
				d.pos++
				d.depth--
				return true
			}
			return false
		}
	case '"':
		return d.skipString()
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	default:
		end, _, _, _, ok := d.numberEnd()
		if ok {
			d.pos = end
		}
		return ok
	}
}

// skipString reads the string at d.pos, checking its escapes, without unquoting it.
func (d *decoder) skipString() bool {
	data := d.data
	for i := d.pos + 1; i < len(data); {
		switch c := data[i]; {
		case c == '"':
			d.pos = i + 1
			return true
		case c == '\\':
			if i+1 >= len(data) {
				return false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if hex4(data[i+2:]) < 0 {
					return false
				}
				i += 6
			default:
				return false
			}
		case c < ' ':
			return false
		default:
			i++
		}
	}
	return false
}
