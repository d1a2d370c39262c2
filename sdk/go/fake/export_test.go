package fake

import (
	"context"

	"github.com/wasmrec/wasmrec/abi"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

// RawCall makes a host call with a request the Client would not send.
func RawCall(ctx context.Context, c *Cluster, fn, body string) error {
	status, resp := c.Call(ctx, fn, []byte(body))
	if status != abi.StatusOK {
		return &wasmrec.StatusError{Call: fn, Status: status, Message: string(resp)}
	}
	return nil
}

// RawLog logs a line the SDK would not send.
func RawLog(c *Cluster, level int32, line string) { transport{c}.Log(level, []byte(line)) }
