package fake

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A label selector in kubectl's form, parsed as k8s.io/apimachinery/pkg/labels.Parse does:
// requirements separated by commas, each "key", "!key", "key=value", "key==value",
// "key!=value", "key in (a,b)", "key notin (a,b)", "key>1" or "key<1", with keys and values
// checked as label keys and values. The empty selector matches everything.

type selectorOp int

const (
	opExists selectorOp = iota
	opNotExists
	opIn // =, ==, in
	opNotIn
	opGreater
	opLess
)

type requirement struct {
	key    string
	op     selectorOp
	values []string
	num    int64 // opGreater, opLess
}

type selector []requirement

func (s selector) matches(labels map[string]string) bool {
	for _, r := range s {
		v, has := labels[r.key]
		switch r.op {
		case opExists:
			if !has {
				return false
			}
		case opNotExists:
			if has {
				return false
			}
		case opIn:
			if !has || !slices.Contains(r.values, v) {
				return false
			}
		case opNotIn:
			if has && slices.Contains(r.values, v) {
				return false
			}
		case opGreater, opLess:
			n, err := strconv.ParseInt(v, 10, 64)
			if !has || err != nil || (r.op == opGreater && n <= r.num) || (r.op == opLess && n >= r.num) {
				return false
			}
		}
	}
	return true
}

type tokenKind int

const (
	tokEnd tokenKind = iota
	tokIdent
	tokNot       // !
	tokEq        // =
	tokDoubleEq  // ==
	tokNotEq     // !=
	tokIn        // in
	tokNotIn     // notin
	tokGreater   // >
	tokLess      // <
	tokOpen      // (
	tokClose     // )
	tokComma     // ,
	tokBadSymbol // an unknown run of symbols
)

type token struct {
	kind tokenKind
	text string
}

// ident reports a token that may be a key or a value: "in" and "notin" are keywords only where
// an operator goes ("in=b", "a=notin" and "in" alone are selectors, as labels.Parse reads them).
func (t token) ident() bool { return t.kind == tokIdent || t.kind == tokIn || t.kind == tokNotIn }

func isSymbol(c byte) bool { return strings.IndexByte("=!(),<>", c) >= 0 }
func isSpace(c byte) bool  { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func lex(s string) []token {
	var out []token
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case isSpace(c):
			i++
		case isSymbol(c):
			j := i
			for j < len(s) && isSymbol(s[j]) {
				j++
			}
			// The longest known symbol that starts the run.
			k := map[string]tokenKind{"!=": tokNotEq, "==": tokDoubleEq, "!": tokNot, "=": tokEq, ">": tokGreater, "<": tokLess, "(": tokOpen, ")": tokClose, ",": tokComma}
			run := s[i:j]
			matched := false
			for n := min(len(run), 2); n > 0; n-- {
				if kind, ok := k[run[:n]]; ok {
					out = append(out, token{kind, run[:n]})
					i += n
					matched = true
					break
				}
			}
			if !matched {
				out = append(out, token{tokBadSymbol, run})
				i = j
			}
		default:
			j := i
			for j < len(s) && !isSpace(s[j]) && !isSymbol(s[j]) {
				j++
			}
			word := s[i:j]
			switch word {
			case "in":
				out = append(out, token{tokIn, word})
			case "notin":
				out = append(out, token{tokNotIn, word})
			default:
				out = append(out, token{tokIdent, word})
			}
			i = j
		}
	}
	return append(out, token{kind: tokEnd})
}

type selectorParser struct {
	toks []token
	pos  int
}

func (p *selectorParser) peek() token { return p.toks[p.pos] }
func (p *selectorParser) next() token {
	t := p.toks[p.pos]
	if t.kind != tokEnd {
		p.pos++
	}
	return t
}

// parseSelector parses a selector; the error says why it does not.
func parseSelector(s string) (selector, error) {
	p := &selectorParser{toks: lex(s)}
	var out selector
	for {
		if p.peek().kind == tokEnd {
			if len(out) > 0 {
				return nil, fmt.Errorf("found '', expected: identifier after ','")
			}
			return out, nil
		}
		r, err := p.requirement()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		switch t := p.next(); t.kind {
		case tokEnd:
			return out, nil
		case tokComma:
			if p.peek().kind == tokEnd {
				return nil, fmt.Errorf("found '', expected: identifier after ','")
			}
		default:
			return nil, fmt.Errorf("found '%s', expected: ',' or 'end of string'", t.text)
		}
	}
}

func (p *selectorParser) requirement() (requirement, error) {
	if p.peek().kind == tokNot {
		p.next()
		t := p.next()
		if !t.ident() {
			return requirement{}, fmt.Errorf("found '%s', expected: identifier after '!'", t.text)
		}
		if err := validKey(t.text); err != nil {
			return requirement{}, err
		}
		return requirement{key: t.text, op: opNotExists}, nil
	}
	t := p.next()
	if !t.ident() {
		return requirement{}, fmt.Errorf("found '%s', expected: !, identifier, or 'end of string'", t.text)
	}
	if err := validKey(t.text); err != nil {
		return requirement{}, err
	}
	r := requirement{key: t.text}
	switch op := p.peek(); op.kind {
	case tokEnd, tokComma:
		r.op = opExists
		return r, nil
	case tokEq, tokDoubleEq, tokNotEq:
		p.next()
		r.op = opIn
		if op.kind == tokNotEq {
			r.op = opNotIn
		}
		v := ""
		switch n := p.peek(); {
		case n.ident():
			v = p.next().text
		case n.kind == tokEnd, n.kind == tokComma:
		default:
			return requirement{}, fmt.Errorf("found '%s', expected: identifier", n.text)
		}
		if err := validValue(v); err != nil {
			return requirement{}, err
		}
		r.values = []string{v}
		return r, nil
	case tokIn, tokNotIn:
		p.next()
		r.op = opIn
		if op.kind == tokNotIn {
			r.op = opNotIn
		}
		if t := p.next(); t.kind != tokOpen {
			return requirement{}, fmt.Errorf("found '%s', expected: '('", t.text)
		}
		for {
			v := ""
			if p.peek().ident() {
				v = p.next().text
			}
			if err := validValue(v); err != nil {
				return requirement{}, err
			}
			switch t := p.next(); t.kind {
			case tokComma:
				r.values = append(r.values, v)
				continue
			case tokClose:
				// "()" is the set of the empty value, as labels.Parse reads it: "app in ()"
				// selects an empty app label, "app notin ()" anything else.
				r.values = append(r.values, v)
			default:
				return requirement{}, fmt.Errorf("found '%s', expected: ',' or ')'", t.text)
			}
			break
		}
		return r, nil
	case tokGreater, tokLess:
		p.next()
		r.op = opGreater
		if op.kind == tokLess {
			r.op = opLess
		}
		t := p.next()
		n, err := strconv.ParseInt(t.text, 10, 64)
		if !t.ident() || err != nil {
			return requirement{}, fmt.Errorf("for 'Gt', 'Lt' operators, the value must be an integer: %q", t.text)
		}
		if err := validValue(t.text); err != nil { // "-1" is an integer, not a label value
			return requirement{}, err
		}
		r.num, r.values = n, []string{t.text}
		return r, nil
	default:
		return requirement{}, fmt.Errorf("found '%s', expected: in, notin, =, ==, !=, gt, lt", op.text)
	}
}
