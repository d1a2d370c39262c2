package wasm

// CodeBudget is charged for the host memory a module's compiled code takes (Options.Code): what
// compiling it costs while it compiles, and what its code holds after, until the module is closed.
// Charge refuses with an error that names the plugin and says why and what to do; Compile then
// returns it as a *BudgetError, as it is, compiling nothing. Both are called from the goroutine that compiles or closes.
type CodeBudget interface {
	Charge(n int64) error
	Release(n int64)
}

// Compiling a module takes the host about CompilePeak times its size, and its compiled code
// holds about CodeHeld times its size after (machine code is 4-5 times a code section, and
// wazero keeps the decoded module beside it). Measured on this host's engine, compiling with no
// on-disk cache, from before compiling to the peak, and to after a collection: a 3.8 MB Go guest
// 17x and 7.6x, a 19.6 MB Go guest 17.7x and 6.2x, a 0.19 MB C guest 60x and 20x (the runtime
// and its first instance weigh more than so small a code; the instance's memory is charged as
// memoryLimit, apart).
const (
	CompilePeak = 18
	CodeHeld    = 8
)

// BudgetError is a module refused by its CodeBudget: nothing is wrong with the module, and it may
// fit later, once other modules hold less.
type BudgetError struct{ Err error }

func (e *BudgetError) Error() string { return e.Err.Error() }

func (e *BudgetError) Unwrap() error { return e.Err }

// codeCharge is what a Module holds of its CodeBudget.
type codeCharge struct {
	budget CodeBudget
	held   int64
}

// chargeCompile charges the cost of compiling size bytes, or only what the code holds if the
// engine holds it compiled already (shared); settle then lowers it to what the code holds, and
// release gives that back.
func chargeCompile(b CodeBudget, size int, compiled bool) (*codeCharge, error) {
	if b == nil {
		return nil, nil
	}
	peak := int64(size) * CompilePeak
	if compiled {
		peak = int64(size) * CodeHeld
	}
	if err := b.Charge(peak); err != nil {
		return nil, &BudgetError{Err: err}
	}
	return &codeCharge{budget: b, held: peak}, nil
}

func (c *codeCharge) settle(size int) {
	if c == nil {
		return
	}
	held := int64(size) * CodeHeld
	c.budget.Release(c.held - held)
	c.held = held
}

func (c *codeCharge) release() {
	if c == nil {
		return
	}
	c.budget.Release(c.held)
	c.held = 0
}
