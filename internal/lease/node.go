package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgsched/pgsched/internal/store"
)

// ErrExpired is returned by Term.Check once the term's lease deadline has
// passed or the term has ended.
var ErrExpired = errors.New("node lease expired")

// monoBase anchors the terms' deadlines to the monotonic clock: a deadline
// is kept as the time since monoBase, so it can be read and moved
// atomically, and no wall-clock step moves it.
var monoBase = time.Now()

// Term is one registration of a node: an epoch, a local deadline and a
// context that ends when the lease is lost (or the node stops). Everything
// claimed under a term carries its epoch, so once the term ends, that
// work's late writes are fenced off by the database.
//
// The context ends when the node's lease goroutine notices the loss, which
// after a freeze (SIGSTOP, a VM pause) can be later than other goroutines
// whose timers fired at the same moment. The deadline closes that gap for
// side effects: it is the time the last successful renewal was sent plus
// the TTL on this process's monotonic clock, never later than the
// database's expiry, and Live reads it directly, so a goroutine that wakes
// with every timer overdue still sees the term as over.
type Term struct {
	Epoch    int64
	ctx      context.Context
	deadline atomic.Int64 // nanoseconds since monoBase
}

// Context is cancelled when the term ends.
func (t *Term) Context() context.Context { return t.ctx }

// Done is closed when the term ends.
func (t *Term) Done() <-chan struct{} { return t.ctx.Done() }

// Live reports whether the term has not ended and its lease deadline has
// not passed by this process's monotonic clock.
func (t *Term) Live() bool {
	return t.ctx.Err() == nil && time.Since(monoBase) < time.Duration(t.deadline.Load())
}

// Check returns ErrExpired unless the term is Live.
func (t *Term) Check() error {
	if !t.Live() {
		return fmt.Errorf("%w (epoch %d)", ErrExpired, t.Epoch)
	}
	return nil
}

// Deadline is when the term's lease runs out by this process's clock
// unless renewed first.
func (t *Term) Deadline() time.Time {
	return monoBase.Add(time.Duration(t.deadline.Load()))
}

func (t *Term) setDeadline(at time.Time) { t.deadline.Store(int64(at.Sub(monoBase))) }

// Events receives the node's state transitions (for metrics). Any field may
// be nil.
type Events struct {
	Registered func(epoch int64)
	Renewed    func()
	Lost       func(epoch int64, reason string)
}

// NodeConfig configures a Node.
type NodeConfig struct {
	ID string
	// Instance tells this process from any other started with the same
	// node id. Defaults to a random value.
	Instance string
	Store    store.Store
	DB       store.DBTX
	// TTL of the lease. Defaults to 10s.
	TTL time.Duration
	// RenewEvery is how often the lease is renewed. Defaults to TTL/3.
	RenewEvery time.Duration
	Host       string
	PID        int
	Logger     *slog.Logger
	Events     Events
}

// Node keeps this process's lease in the nodes table.
type Node struct {
	cfg NodeConfig

	leaving atomic.Bool // a clean stop began: every registration from now on is leaving
	// waiting says why the node may not register yet (see WaitError);
	// nil once it holds a term.
	waiting atomic.Pointer[WaitError]
	// lastEpoch is the latest epoch this process registered: a new term's
	// epoch is always greater, even on a server that went back in time.
	lastEpoch int64

	mu      sync.Mutex
	term    *Term
	cancel  context.CancelFunc
	changed chan struct{} // closed and replaced on every term change
}

// NewNode validates cfg and returns a Node; Run starts it.
func NewNode(cfg NodeConfig) (*Node, error) {
	if cfg.ID == "" {
		return nil, errors.New("lease: node id is required")
	}
	if cfg.Store == nil || cfg.DB == nil {
		return nil, errors.New("lease: store and db are required")
	}
	if cfg.TTL == 0 {
		cfg.TTL = 10 * time.Second
	}
	if cfg.TTL < 100*time.Millisecond {
		return nil, fmt.Errorf("lease: TTL %s is too short (minimum 100ms)", cfg.TTL)
	}
	if cfg.RenewEvery == 0 {
		cfg.RenewEvery = cfg.TTL / 3
	}
	if cfg.RenewEvery >= cfg.TTL {
		return nil, fmt.Errorf("lease: renew interval %s must be shorter than the TTL %s", cfg.RenewEvery, cfg.TTL)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Instance == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.Instance = hex.EncodeToString(b[:])
	}
	return &Node{cfg: cfg, changed: make(chan struct{})}, nil
}

// WaitError says why a node may not register yet, and for how long.
type WaitError struct {
	// Reason is store.WaitNodeID or store.WaitFailover.
	Reason string
	// Until is when the wait ends, by this process's clock.
	Until time.Time
	// Holder names the process holding the node id (WaitNodeID).
	Holder string
	// Timeline is the server's new timeline and Since when the first node
	// registered on it (WaitFailover).
	Timeline int
	Since    time.Time
}

func (e *WaitError) Error() string {
	if e.Reason == store.WaitFailover {
		return fmt.Sprintf("the database server is the primary of a new timeline (%d) since %s: a failover; "+
			"no node registers until every lease of the old primary has run out, at %s",
			e.Timeline, e.Since.UTC().Format(time.RFC3339Nano), e.Until.UTC().Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("node id is held by another process (%s) until %s: two processes must not share a node id; waiting",
		e.Holder, e.Until.UTC().Format(time.RFC3339Nano))
}

// Waiting returns why the node may not register yet, or nil.
func (n *Node) Waiting() *WaitError { return n.waiting.Load() }

// ID is the node's id.
func (n *Node) ID() string { return n.cfg.ID }

// Leaving reports whether a clean stop has begun (see Leave).
func (n *Node) Leaving() bool { return n.leaving.Load() }

// Current returns the live term, or nil while the node holds no lease or
// its lease deadline has passed.
func (n *Node) Current() *Term {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.term != nil && n.term.Live() {
		return n.term
	}
	return nil
}

// Changed returns a channel closed at the next term change.
func (n *Node) Changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.changed
}

func (n *Node) setTerm(t *Term, cancel context.CancelFunc) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cancel != nil {
		n.cancel()
	}
	n.term, n.cancel = t, cancel
	close(n.changed)
	n.changed = make(chan struct{})
}

// Run registers the node and keeps its lease until ctx ends; then it ends
// the term and deregisters (with a fresh short timeout, so a cancelled ctx
// still lets the fleet take over at once rather than after the TTL).
func (n *Node) Run(ctx context.Context) error {
	defer n.resign()
	const firstBackoff = 100 * time.Millisecond
	backoff := firstBackoff
	var lastWait *WaitError
	for ctx.Err() == nil {
		held, err := n.hold(ctx)
		if ctx.Err() != nil {
			return nil
		}
		pause := backoff
		var wait *WaitError
		switch {
		case errors.As(err, &wait):
			n.logWait(wait, lastWait)
			lastWait, pause = wait, max(time.Until(wait.Until), time.Millisecond)
		case held:
			// A term was held: this is a new loss, not a run of failed
			// registrations. Come back quickly, before a stand-in is needed.
			backoff, pause = firstBackoff, firstBackoff
			n.cfg.Logger.Warn("node lease lost", "error", err)
		default:
			n.cfg.Logger.Warn("registering the node failed; retrying", "error", err, "in", pause)
			// At most a second apart, so a node is back soon after its
			// database (a restart, a promoted standby).
			backoff = min(backoff*2, n.cfg.TTL, time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
	}
	return nil
}

// logWait logs a wait: a failover once per timeline; a node id held by
// another process as a warning when first seen (a restart after a crash
// waits for its predecessor's lease), and as an error every time that
// process is found to hold it still, since then it is alive and renewing:
// two processes configured with one node id.
func (n *Node) logWait(w, last *WaitError) {
	switch {
	case w.Reason == store.WaitFailover:
		if last == nil || last.Reason != w.Reason || last.Timeline != w.Timeline {
			n.cfg.Logger.Warn("database failover: waiting until every lease of the old primary has run out before registering",
				"timeline", w.Timeline, "timeline_since", w.Since, "until", w.Until, "wait", time.Until(w.Until).Round(time.Millisecond))
		}
	case last != nil && last.Reason == w.Reason && last.Holder == w.Holder:
		n.cfg.Logger.Error("node id still held by another live process: two processes must not share a node id; waiting",
			"node_id", n.cfg.ID, "holder", w.Holder, "until", w.Until)
	default:
		n.cfg.Logger.Warn("node id held by another process: waiting until its lease ends (a crashed process's lease runs out within one TTL; a live one means two processes share this node id)",
			"node_id", n.cfg.ID, "holder", w.Holder, "until", w.Until, "wait", time.Until(w.Until).Round(time.Millisecond))
	}
}

// hold registers a new term and renews it until renewal fails or the local
// deadline (last successful renewal sent + TTL) passes, whichever is first.
// held reports whether a term was registered at all.
func (n *Node) hold(ctx context.Context) (held bool, err error) {
	sent := time.Now()
	reg, err := n.cfg.Store.NodeRegister(ctx, n.cfg.DB, n.cfg.ID, n.cfg.Instance, n.cfg.TTL, n.cfg.Host, n.cfg.PID,
		n.leaving.Load(), n.lastEpoch)
	if err != nil {
		return false, fmt.Errorf("registering node: %w", err)
	}
	if reg.Wait != "" {
		w := &WaitError{Reason: reg.Wait, Until: time.Now().Add(reg.WaitFor), Timeline: reg.Timeline, Since: reg.TimelineSince,
			Holder: fmt.Sprintf("host %s, pid %d", reg.HolderHost, reg.HolderPID)}
		n.waiting.Store(w)
		return false, w
	}
	n.waiting.Store(nil)
	lease := reg.Lease
	n.lastEpoch = lease.Epoch
	termCtx, cancel := context.WithCancel(context.Background())
	term := &Term{Epoch: lease.Epoch, ctx: termCtx}
	deadline := sent.Add(n.cfg.TTL)
	term.setDeadline(deadline)
	n.setTerm(term, cancel)
	n.cfg.Logger.Info("node registered", "epoch", lease.Epoch, "lease_expires_at", lease.ExpiresAt, "timeline", reg.Timeline)
	if f := n.cfg.Events.Registered; f != nil {
		f(lease.Epoch)
	}
	n.afterRegister(ctx, lease.Epoch)
	lost := func(reason string) error {
		n.setTerm(nil, nil)
		if f := n.cfg.Events.Lost; f != nil {
			f(lease.Epoch, reason)
		}
		return errors.New(reason)
	}
	ticker := time.NewTicker(n.cfg.RenewEvery)
	defer ticker.Stop()
	expiry := time.NewTimer(time.Until(deadline))
	defer expiry.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-expiry.C:
			return true, lost(fmt.Sprintf("could not renew the lease of epoch %d before it ran out", lease.Epoch))
		case <-ticker.C:
		}
		sent := time.Now()
		rctx, rcancel := context.WithDeadline(ctx, deadline)
		_, err := n.cfg.Store.NodeRenew(rctx, n.cfg.DB, n.cfg.ID, lease.Epoch, n.cfg.TTL)
		rcancel()
		switch {
		case err == nil:
			if time.Now().After(deadline) {
				// Renewed in the database, but only after our own deadline
				// passed: the term's context is about to be cancelled anyway.
				return true, lost(fmt.Sprintf("lease of epoch %d renewed too late", lease.Epoch))
			}
			deadline = sent.Add(n.cfg.TTL)
			term.setDeadline(deadline)
			expiry.Reset(time.Until(deadline))
			if f := n.cfg.Events.Renewed; f != nil {
				f()
			}
		case errors.Is(err, store.ErrLeaseLost):
			return true, lost(fmt.Sprintf("lease of epoch %d had expired or was taken over", lease.Epoch))
		case ctx.Err() != nil:
			return true, ctx.Err()
		default:
			n.cfg.Logger.Warn("renewing node lease failed; retrying", "epoch", lease.Epoch, "error", err)
		}
	}
}

// Leave marks the current term as leaving (a clean stop has begun): the
// lease is kept, so outcomes of the tasks still draining count, but the
// node serves no partition any more and the cluster is told at once.
func (n *Node) Leave(ctx context.Context) error {
	n.leaving.Store(true)
	t := n.Current()
	if t == nil {
		return nil
	}
	if err := n.cfg.Store.NodeLeave(ctx, n.cfg.DB, n.cfg.ID, t.Epoch); err != nil {
		return fmt.Errorf("marking node %s leaving: %w", n.cfg.ID, err)
	}
	n.cfg.Logger.Info("node leaving: partitions handed over while it drains", "epoch", t.Epoch)
	return n.cfg.Store.NotifyCluster(ctx, n.cfg.DB)
}

func (n *Node) resign() {
	// The term as registered, even past its local deadline: deregistering
	// a term the database may still count as live lets peers take over at
	// once, and the epoch fences it if it is not.
	n.mu.Lock()
	t := n.term
	n.mu.Unlock()
	n.setTerm(nil, nil)
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.cfg.Store.NodeDeregister(ctx, n.cfg.DB, n.cfg.ID, t.Epoch); err != nil {
		n.cfg.Logger.Warn("deregistering node failed; its lease will expire", "error", err)
		return
	}
	n.cfg.Logger.Info("node deregistered", "epoch", t.Epoch)
	if err := n.cfg.Store.NotifyCluster(ctx, n.cfg.DB); err != nil {
		n.cfg.Logger.Warn("announcing the leave failed; the leader will notice on its next round", "error", err)
	}
	// Anything still marked running under this node (a straggler whose
	// outcome could not be written) goes back to its queue now rather than
	// waiting for a peer's rescue.
	if k, err := n.cfg.Store.RescueExpired(ctx, n.cfg.DB, []string{n.cfg.ID}); err != nil {
		n.cfg.Logger.Warn("releasing leftover tasks failed; peers will rescue them", "error", err)
	} else if k > 0 {
		n.cfg.Logger.Info("released leftover running tasks", "tasks", k)
	}
}

// afterRegister announces the node to the leader and gives back tasks an
// earlier term of this node id left running (a restart faster than the
// TTL): the new epoch fences them, so they would otherwise wait for a peer.
// The announcement comes first: the give-back reads every head (running
// ones have no index), and the leader can plan the node's partitions
// meanwhile.
func (n *Node) afterRegister(ctx context.Context, epoch int64) {
	if err := n.cfg.Store.NotifyCluster(ctx, n.cfg.DB); err != nil {
		n.cfg.Logger.Warn("announcing the node failed; the leader will notice on its next round", "error", err)
	}
	if k, err := n.cfg.Store.RescueExpired(ctx, n.cfg.DB, []string{n.cfg.ID}); err != nil {
		n.cfg.Logger.Warn("giving back tasks of an earlier term failed; the leader will", "error", err)
	} else if k > 0 {
		n.cfg.Logger.Info("gave back running tasks of an earlier term", "epoch", epoch, "tasks", k)
	}
}
