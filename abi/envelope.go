package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// RequestHeaderSize is the fixed part of a request envelope.
const RequestHeaderSize = 16

// Request is what the host asks a plugin to reconcile.
type Request struct {
	Namespace string
	Name      string
	// Retries is how many times in a row this request was retried with backoff: failures and
	// Requeue results since the last success, RequeueAfter or terminal error (0 on the first try).
	Retries uint32
	// DropsDebug says the host keeps none of this reconcile's debug lines (LogDebug): the guest
	// need not make them. A host that predates it sends false.
	DropsDebug bool
}

// FlagDropsDebug is the bit of a request envelope's flags word that is Request.DropsDebug.
const FlagDropsDebug = 1

// AppendRequest encodes r after b: u32 namespace length, u32 name length, u32 retries,
// u32 flags (FlagDropsDebug), the namespace bytes, the name bytes; little-endian.
func AppendRequest(b []byte, r Request) []byte {
	var flags uint32
	if r.DropsDebug {
		flags |= FlagDropsDebug
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Namespace)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Name)))
	b = binary.LittleEndian.AppendUint32(b, r.Retries)
	b = binary.LittleEndian.AppendUint32(b, flags)
	b = append(b, r.Namespace...)
	return append(b, r.Name...)
}

// DecodeRequest decodes a request envelope.
func DecodeRequest(b []byte) (Request, error) {
	if len(b) < RequestHeaderSize {
		return Request{}, fmt.Errorf("request envelope of %d bytes is shorter than its %d-byte header", len(b), RequestHeaderSize)
	}
	nsLen := binary.LittleEndian.Uint32(b[0:])
	nameLen := binary.LittleEndian.Uint32(b[4:])
	if uint64(nsLen)+uint64(nameLen) != uint64(len(b)-RequestHeaderSize) {
		return Request{}, fmt.Errorf("request envelope lengths %d+%d do not match its %d-byte body", nsLen, nameLen, len(b)-RequestHeaderSize)
	}
	body := b[RequestHeaderSize:]
	return Request{
		Namespace:  string(body[:nsLen]),
		Name:       string(body[nsLen:]),
		Retries:    binary.LittleEndian.Uint32(b[8:]),
		DropsDebug: binary.LittleEndian.Uint32(b[12:])&FlagDropsDebug != 0,
	}, nil
}

// MaxMapResult bounds what a map export returns: its list of request envelopes.
const MaxMapResult = 16 << 20

// DecodeRequests decodes what a map export returns: request envelopes one after another, each
// with retries and flags 0.
func DecodeRequests(b []byte) ([]Request, error) {
	if len(b) > MaxMapResult {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformedRequests, len(b), MaxMapResult)
	}
	var reqs []Request
	for off := 0; off < len(b); {
		rest := b[off:]
		if len(rest) < RequestHeaderSize {
			return nil, fmt.Errorf("%w: request %d at byte %d: %d bytes, shorter than its %d-byte header", ErrMalformedRequests, len(reqs), off, len(rest), RequestHeaderSize)
		}
		nsLen := uint64(binary.LittleEndian.Uint32(rest[0:]))
		nameLen := uint64(binary.LittleEndian.Uint32(rest[4:]))
		if binary.LittleEndian.Uint32(rest[8:]) != 0 || binary.LittleEndian.Uint32(rest[12:]) != 0 {
			return nil, fmt.Errorf("%w: request %d at byte %d: retries and flags must be 0", ErrMalformedRequests, len(reqs), off)
		}
		if nameLen == 0 || RequestHeaderSize+nsLen+nameLen > uint64(len(rest)) {
			return nil, fmt.Errorf("%w: request %d at byte %d: lengths %d+%d do not fit the %d bytes left, or the name is empty", ErrMalformedRequests, len(reqs), off, nsLen, nameLen, len(rest)-RequestHeaderSize)
		}
		body := rest[RequestHeaderSize:]
		reqs = append(reqs, Request{Namespace: string(body[:nsLen]), Name: string(body[nsLen : nsLen+nameLen])})
		off += RequestHeaderSize + int(nsLen+nameLen)
	}
	return reqs, nil
}

// ErrMalformedRequests is wrapped by every DecodeRequests error.
var ErrMalformedRequests = errors.New("malformed map result")

// ResultHeaderSize is the fixed part of a result envelope.
const ResultHeaderSize = 16

// Result flags.
const (
	FlagRequeue  uint32 = 1 << 0
	FlagError    uint32 = 1 << 1
	FlagTerminal uint32 = 1 << 2 // only with FlagError: do not retry

	knownFlags = FlagRequeue | FlagError | FlagTerminal
)

// MaxMessage bounds the error message of a result.
const MaxMessage = 64 << 10

// Result is what a plugin answers.
type Result struct {
	Requeue      bool
	RequeueAfter time.Duration
	// Err is set when the reconcile failed; Terminal says not to retry.
	Err      string
	Failed   bool
	Terminal bool
}

// AppendResult encodes r after b: u32 flags, u32 message length, i64 requeueAfter in
// nanoseconds, the message bytes; little-endian.
func AppendResult(b []byte, r Result) []byte {
	var flags uint32
	if r.Requeue {
		flags |= FlagRequeue
	}
	if r.Failed {
		flags |= FlagError
		if r.Terminal {
			flags |= FlagTerminal
		}
	}
	b = binary.LittleEndian.AppendUint32(b, flags)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Err)))
	b = binary.LittleEndian.AppendUint64(b, uint64(r.RequeueAfter))
	return append(b, r.Err...)
}

// ErrMalformedResult is wrapped by every DecodeResult error.
var ErrMalformedResult = errors.New("malformed result envelope")

// DecodeResult decodes and checks a result envelope. Anything it does not accept is an error
// wrapping ErrMalformedResult: the host treats it as a failed reconcile.
func DecodeResult(b []byte) (Result, error) {
	if len(b) < ResultHeaderSize {
		return Result{}, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrMalformedResult, len(b), ResultHeaderSize)
	}
	flags := binary.LittleEndian.Uint32(b[0:])
	msgLen := binary.LittleEndian.Uint32(b[4:])
	after := int64(binary.LittleEndian.Uint64(b[8:]))
	switch {
	case flags&^knownFlags != 0:
		return Result{}, fmt.Errorf("%w: unknown flags %#x", ErrMalformedResult, flags&^knownFlags)
	case flags&FlagTerminal != 0 && flags&FlagError == 0:
		return Result{}, fmt.Errorf("%w: terminal flag without the error flag", ErrMalformedResult)
	case uint64(msgLen) != uint64(len(b)-ResultHeaderSize):
		return Result{}, fmt.Errorf("%w: message length %d does not match the %d bytes after the header", ErrMalformedResult, msgLen, len(b)-ResultHeaderSize)
	case msgLen > MaxMessage:
		return Result{}, fmt.Errorf("%w: message of %d bytes exceeds %d", ErrMalformedResult, msgLen, MaxMessage)
	case after < 0:
		return Result{}, fmt.Errorf("%w: negative requeueAfter %d", ErrMalformedResult, after)
	case msgLen > 0 && flags&FlagError == 0:
		return Result{}, fmt.Errorf("%w: a message without the error flag", ErrMalformedResult)
	}
	r := Result{
		Requeue:      flags&FlagRequeue != 0,
		RequeueAfter: time.Duration(after),
		Failed:       flags&FlagError != 0,
		Terminal:     flags&FlagTerminal != 0,
	}
	if r.Failed {
		msg := b[ResultHeaderSize:]
		if !utf8.Valid(msg) {
			r.Err = string([]rune(string(msg))) // invalid bytes become U+FFFD
		} else {
			r.Err = string(msg)
		}
		if r.Err == "" {
			r.Err = "the plugin reported an error without a message"
		}
	}
	return r, nil
}
