package pgsched

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"reflect"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched/internal/execute"
	"github.com/pgsched/pgsched/internal/metrics"
	"github.com/pgsched/pgsched/internal/store"
)

// minLeaseTTL mirrors the shortest lease lease.NewNode accepts, so a
// too-short LeaseTTL is a config error at NewWorker rather than at Start.
const minLeaseTTL = 100 * time.Millisecond

// NewWorker validates cfg and returns a Worker; Start runs it. Every
// problem that needs no database shows here, as a *ConfigError matching
// ErrInvalidConfig.
func NewWorker(pool *pgxpool.Pool, cfg WorkerConfig) (*Worker, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: NewWorker needs a pool", ErrInvalidConfig)
	}
	if _, err := store.New(cfg.Schema); err != nil {
		return nil, &ConfigError{Field: "Schema", Err: fmt.Errorf("Schema: %w", err)}
	}
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	kinds, err := kindHandlers(cfg)
	if err != nil {
		return nil, err
	}
	cfg = withDefaults(cfg)
	// Checked on the filled-in values: an explicit ClusterInterval must stay
	// below the lease it is derived from by default.
	if cfg.ClusterInterval >= cfg.LeaseTTL {
		return nil, configErr("ClusterInterval", "ClusterInterval %s must be shorter than LeaseTTL %s", cfg.ClusterInterval, cfg.LeaseTTL)
	}
	m, err := metrics.New(cfg.Registerer)
	if err != nil {
		return nil, &ConfigError{Field: "Registerer", Err: fmt.Errorf("Registerer: registering metrics: %w", err)}
	}
	m.BuildInfo.WithLabelValues(Version(), runtime.Version()).Set(1)
	return &Worker{pool: pool, cfg: cfg, kinds: kinds, metrics: m, logger: cfg.Logger.With("node_id", cfg.NodeID)}, nil
}

// checkConfig refuses values no default can make sense of.
func checkConfig(cfg WorkerConfig) error {
	if cfg.LeaseTTL != 0 && cfg.LeaseTTL < minLeaseTTL {
		return configErr("LeaseTTL", "LeaseTTL %s is too short (minimum %s)", cfg.LeaseTTL, minLeaseTTL)
	}
	if cfg.Concurrency < 0 || cfg.Concurrency > MaxConcurrency {
		return configErr("Concurrency", "Concurrency must be between 1 and %d (0: the default, %d), got %d",
			MaxConcurrency, DefaultConcurrency, cfg.Concurrency)
	}
	if cfg.Prefetch > MaxPrefetch {
		return configErr("Prefetch", "Prefetch must be at most %d (0: as many as Concurrency; negative: none), got %d",
			MaxPrefetch, cfg.Prefetch)
	}
	if cfg.MaxOutputBytes < 0 || cfg.MaxOutputBytes > MaxOutputBytes {
		return configErr("MaxOutputBytes", "MaxOutputBytes must be between 1 and %d (0: the default, %d), got %d",
			MaxOutputBytes, DefaultMaxOutputBytes, cfg.MaxOutputBytes)
	}
	if cfg.FinishBatch < 0 {
		return configErr("FinishBatch", "FinishBatch must not be negative, got %d", cfg.FinishBatch)
	}
	if cfg.ClaimAhead > time.Second {
		return configErr("ClaimAhead", "ClaimAhead must be at most 1s, got %s", cfg.ClaimAhead)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"PollInterval", cfg.PollInterval}, {"MaintenanceInterval", cfg.MaintenanceInterval},
		{"ClusterInterval", cfg.ClusterInterval}, {"DrainTimeout", cfg.DrainTimeout},
		{"FlexDown", cfg.FlexDown}, {"FinishDelay", cfg.FinishDelay}, {"CountInterval", cfg.CountInterval},
	} {
		if d.v < 0 {
			return configErr(d.field, "%s must not be negative, got %s", d.field, d.v)
		}
	}
	if err := checkRetry("Retry", cfg.Retry); err != nil {
		return err
	}
	for i, r := range cfg.Recurring {
		if err := r.Check(); err != nil {
			field := fmt.Sprintf("Recurring[%d]", i)
			return &ConfigError{Field: field, Err: fmt.Errorf("%s: %w", field, err)}
		}
	}
	for kind, p := range cfg.KindRetry {
		if err := checkRetry(fmt.Sprintf("KindRetry[%q]", kind), p); err != nil {
			return err
		}
	}
	return nil
}

// kindHandlers resolves cfg's handler maps into one table by kind, as the
// executor runs them.
func kindHandlers(cfg WorkerConfig) (map[string]execute.Kind, error) {
	kinds := make(map[string]execute.Kind, len(cfg.Handlers)+len(cfg.TxHandlers))
	for kind, h := range cfg.Handlers {
		if isNil(h) {
			return nil, configErr(fmt.Sprintf("Handlers[%q]", kind), "Handlers[%q] is nil", kind)
		}
		kinds[kind] = execute.Kind{Work: h}
	}
	for kind, h := range cfg.TxHandlers {
		field := fmt.Sprintf("TxHandlers[%q]", kind)
		if isNil(h) {
			return nil, configErr(field, "%s is nil", field)
		}
		if _, dup := kinds[kind]; dup {
			return nil, configErr(field, "kind %q is in both Handlers and TxHandlers", kind)
		}
		kinds[kind] = execute.Kind{Tx: h}
	}
	for kind, k := range kinds {
		k.Retry = cfg.Retry
		if p, ok := cfg.KindRetry[kind]; ok {
			k.Retry = p
		}
		kinds[kind] = k
	}
	return kinds, nil
}

// isNil reports whether v is nil or a nil func, pointer or map inside an
// interface (a HandlerFunc(nil) would panic on its first task).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Func, reflect.Pointer, reflect.Map, reflect.Interface, reflect.Slice, reflect.Chan:
		return r.IsNil()
	}
	return false
}

func checkRetry(field string, p RetryPolicy) error {
	switch {
	case p.MaxAttempts < 0:
		return configErr(field, "%s.MaxAttempts must not be negative, got %d", field, p.MaxAttempts)
	case p.MinBackoff < 0:
		return configErr(field, "%s.MinBackoff must not be negative, got %s", field, p.MinBackoff)
	case p.MaxBackoff < 0:
		return configErr(field, "%s.MaxBackoff must not be negative, got %s", field, p.MaxBackoff)
	case math.IsNaN(p.Jitter) || p.Jitter > 1:
		// Past 1 a delay can spread below zero, and NaN or an infinite
		// spread converts to no delay at all: failing tasks would retry
		// at once, without end.
		return configErr(field, "%s.Jitter must be a fraction of at most 1 (negative: none), got %v", field, p.Jitter)
	}
	return nil
}

// withDefaults fills in every zero field of a checked cfg.
func withDefaults(cfg WorkerConfig) WorkerConfig {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NodeID == "" {
		host, _ := os.Hostname()
		cfg.NodeID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	switch {
	case cfg.Prefetch == 0:
		cfg.Prefetch = cfg.Concurrency
	case cfg.Prefetch < 0:
		cfg.Prefetch = 0
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.MaintenanceInterval == 0 {
		cfg.MaintenanceInterval = cfg.LeaseTTL / 4
	}
	if cfg.FlexDown == 0 {
		cfg.FlexDown = DefaultFlexDown
	}
	if cfg.CountInterval == 0 {
		cfg.CountInterval = DefaultCountInterval
	}
	if cfg.MaxOutputBytes == 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	switch {
	case cfg.ClaimAhead == 0:
		cfg.ClaimAhead = DefaultClaimAhead
	case cfg.ClaimAhead < 0:
		cfg.ClaimAhead = 0
	}
	if cfg.ClusterInterval == 0 {
		cfg.ClusterInterval = min(cfg.LeaseTTL/3, time.Second)
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.FinishBatch == 0 {
		cfg.FinishBatch = DefaultFinishBatch
	}
	if cfg.FinishDelay == 0 {
		cfg.FinishDelay = DefaultFinishDelay
	}
	return cfg
}
