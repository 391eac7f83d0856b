package pgschedtype

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pgsched/pgsched/internal/jsonb"
)

// MaxOutputBytes bounds a task's output as RecordOutput takes it; a worker
// may allow less (pgsched.WorkerConfig.MaxOutputBytes).
const MaxOutputBytes = 1 << 20

// maxOutputDepth bounds how deeply an output's arrays and objects nest,
// as for payloads.
const maxOutputDepth = 126

// ErrInvalidOutput is what RecordOutput returns for a value it cannot
// keep: one that does not encode as JSON, that jsonb cannot store, or
// that is too large.
var ErrInvalidOutput = errors.New("pgsched: invalid task output")

// RecordOutput keeps v, encoded as JSON, as the task's result: stored
// with the task's completion record when the handler then returns nil
// (never after a failure or a snooze), kept as long as the completion is
// remembered (the retention window), and read by the task's key
// (Client.TaskOutput, pgsched.task_output in SQL). A later call replaces
// an earlier one; v may be a json.RawMessage. The error (ErrInvalidOutput)
// names the reason, and the task keeps no output.
func (j *Job) RecordOutput(v any) error {
	var b []byte
	switch raw := v.(type) {
	case json.RawMessage:
		b = raw
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidOutput, err)
		}
	}
	if len(b) > MaxOutputBytes {
		return fmt.Errorf("%w: %d bytes, over %d", ErrInvalidOutput, len(b), MaxOutputBytes)
	}
	if reason := jsonb.Problem(b, maxOutputDepth); reason != "" {
		return fmt.Errorf("%w: it %s", ErrInvalidOutput, reason)
	}
	j.output = append(json.RawMessage(nil), b...)
	return nil
}

// Output is what RecordOutput last kept, nil if nothing.
func (j *Job) Output() json.RawMessage { return j.output }
