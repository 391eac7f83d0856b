package lease

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/pgsched/pgsched/internal/store"
)

// Leadership identifies one leader term: the term number and the node term
// (id and epoch) that holds it. The leader's writes are fenced on it.
type Leadership struct {
	Term   int64
	NodeID string
	Epoch  int64
}

// LeaderEvents receives leadership transitions (for metrics). Any field may
// be nil.
type LeaderEvents struct {
	Won       func(term int64)
	Refreshed func(term int64)
	Lost      func(term int64, reason string)
}

// LeaderConfig configures a Leader.
type LeaderConfig struct {
	Node  *Node
	Store store.Store
	DB    store.DBTX
	// TTL of the leader lease. Defaults to the node's TTL.
	TTL time.Duration
	// Interval between attempts to take or renew the lease, and between
	// leader rounds. Defaults to min(TTL/3, 1s), so a dead leader is
	// replaced within TTL + Interval.
	Interval time.Duration
	// Wake triggers an attempt (and round) at once: cluster notifications.
	Wake <-chan struct{}
	// Round runs after every successful take or renewal, while leading. It
	// logs its own failures.
	Round  func(ctx context.Context, l Leadership)
	Logger *slog.Logger
	Events LeaderEvents
}

// Leader competes for the leader lease and, while holding it, runs the
// leader's rounds. Every node runs one; at most one leads at a time.
type Leader struct {
	cfg LeaderConfig

	mu       sync.Mutex
	current  Leadership // zero while not leading
	deadline time.Time  // local end of the lease: last renewal sent + TTL
}

// NewLeader validates cfg and returns a Leader; Run starts it.
func NewLeader(cfg LeaderConfig) (*Leader, error) {
	if cfg.Node == nil || cfg.Store == nil || cfg.DB == nil {
		return nil, errors.New("lease: leader needs a node, a store and a db")
	}
	if cfg.TTL == 0 {
		cfg.TTL = cfg.Node.cfg.TTL
	}
	if cfg.Interval == 0 {
		cfg.Interval = min(cfg.TTL/3, time.Second)
	}
	if cfg.Interval >= cfg.TTL {
		return nil, errors.New("lease: leader interval must be shorter than its TTL")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Leader{cfg: cfg}, nil
}

// Current returns the leadership held, with Term 0 while not leading.
func (l *Leader) Current() Leadership {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.current.Term != 0 && time.Now().After(l.deadline) {
		return Leadership{}
	}
	return l.current
}

// Run competes for leadership until ctx ends, then resigns if leading (on a
// fresh context, so a cancelled ctx still hands over at once).
func (l *Leader) Run(ctx context.Context) error {
	defer l.resign(ctx)
	tick := time.NewTicker(l.cfg.Interval)
	defer tick.Stop()
	for {
		l.step(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-l.cfg.Wake:
		}
	}
}

func (l *Leader) step(ctx context.Context) {
	term := l.cfg.Node.Current()
	l.mu.Lock()
	held := l.current
	l.mu.Unlock()
	if term == nil {
		if held.Term != 0 {
			l.lose(held, "this node holds no lease")
		}
		return
	}
	if l.cfg.Node.Leaving() {
		// A clean stop has begun: hand leadership over now, as a
		// resignation, rather than lose it when the lease is refused to a
		// leaving node.
		l.resign(ctx)
		return
	}
	if held.Term != 0 && held.Epoch != term.Epoch {
		l.lose(held, "this node re-registered under a new epoch")
		held = Leadership{}
	}
	sent := time.Now()
	got, err := l.cfg.Store.LeaderAcquire(ctx, l.cfg.DB, l.cfg.Node.ID(), term.Epoch, l.cfg.TTL)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		l.cfg.Logger.Warn("leader lease attempt failed", "error", err)
		l.mu.Lock()
		expired := held.Term != 0 && time.Now().After(l.deadline)
		l.mu.Unlock()
		if expired {
			l.lose(held, "could not renew the leader lease before it ran out")
		}
		return
	}
	now := Leadership{Term: got, NodeID: l.cfg.Node.ID(), Epoch: term.Epoch}
	switch {
	case got == 0:
		if held.Term != 0 {
			l.lose(held, "another node holds the leader lease")
		}
		return
	case got != held.Term:
		if held.Term != 0 {
			l.lose(held, "leader term changed")
		}
		l.set(now, sent.Add(l.cfg.TTL))
		l.cfg.Logger.Info("leadership won", "term", got, "epoch", term.Epoch)
		if f := l.cfg.Events.Won; f != nil {
			f(got)
		}
	default:
		l.set(now, sent.Add(l.cfg.TTL))
		if f := l.cfg.Events.Refreshed; f != nil {
			f(got)
		}
	}
	if l.cfg.Round != nil {
		l.cfg.Round(ctx, now)
	}
}

func (l *Leader) set(c Leadership, deadline time.Time) {
	l.mu.Lock()
	l.current, l.deadline = c, deadline
	l.mu.Unlock()
}

func (l *Leader) lose(held Leadership, reason string) {
	l.set(Leadership{}, time.Time{})
	l.cfg.Logger.Warn("leadership lost", "term", held.Term, "reason", reason)
	if f := l.cfg.Events.Lost; f != nil {
		f(held.Term, reason)
	}
}

func (l *Leader) resign(ctx context.Context) {
	l.mu.Lock()
	held := l.current
	l.mu.Unlock()
	if held.Term == 0 {
		return
	}
	l.set(Leadership{}, time.Time{})
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := l.cfg.Store.LeaderResign(ctx, l.cfg.DB, held.NodeID, held.Epoch); err != nil {
		l.cfg.Logger.Warn("resigning leadership failed; the lease will expire", "term", held.Term, "error", err)
	} else {
		l.cfg.Logger.Info("leadership resigned", "term", held.Term)
	}
	if f := l.cfg.Events.Lost; f != nil {
		f(held.Term, "resigned")
	}
}
