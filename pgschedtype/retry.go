package pgschedtype

import "time"

// RetryPolicy says how a failing kind is retried.
type RetryPolicy struct {
	// MaxAttempts ends retries: after this many runs the task is dead.
	// 0 retries forever.
	MaxAttempts int
	// MinBackoff is the delay after the first failure. Defaults to 1s.
	MinBackoff time.Duration
	// MaxBackoff caps the delay. Defaults to 5m.
	MaxBackoff time.Duration
	// Jitter spreads each delay by up to this fraction, at most 1.
	// Defaults to 0.2; negative means none.
	Jitter float64
}

// WithDefaults is p with every unset field at its default.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	if p.MinBackoff <= 0 {
		p.MinBackoff = time.Second
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = 5 * time.Minute
	}
	if p.MaxBackoff < p.MinBackoff {
		p.MaxBackoff = p.MinBackoff
	}
	if p.Jitter == 0 {
		p.Jitter = 0.2
	}
	if p.Jitter < 0 {
		p.Jitter = 0
	}
	return p
}

// Backoff is the delay after the attempt-th failed run (attempt ≥ 1):
// MinBackoff doubled per attempt, capped at MaxBackoff, then spread by
// Jitter using rnd in [0,1).
func (p RetryPolicy) Backoff(attempt int, rnd float64) time.Duration {
	p = p.WithDefaults()
	d := p.MinBackoff
	for i := 1; i < attempt && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	spread := time.Duration(float64(d) * p.Jitter * (2*rnd - 1))
	return max(d+spread, 0)
}
