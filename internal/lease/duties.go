package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgsched/pgsched/internal/store"
)

// DutiesState is what a node serves after a refresh (for metrics).
type DutiesState struct {
	Owned    int      // partitions this node owns
	Served   int      // partitions it claims from: owned plus stand-in
	StandIns []string // down nodes it stands in for
	BackupOf int      // nodes it is the backup of
}

// DutiesConfig configures a Duties watcher.
type DutiesConfig struct {
	Node  *Node
	Store store.Store
	DB    store.DBTX
	// Interval between refreshes when nothing wakes the watcher. Defaults
	// to 1s. A refresh is also due the moment a node this one backs up
	// would see its lease run out.
	Interval time.Duration
	// Wake triggers a refresh at once: cluster notifications.
	Wake <-chan struct{}
	// OnChange is called when the set of served partitions changed.
	OnChange func()
	// OnRescue is called with the count of a down node's in-flight tasks
	// this node gave back when it began standing in.
	OnRescue func(n int)
	// OnState is called after every successful refresh.
	OnState func(DutiesState)
	Logger  *slog.Logger
}

// Duties keeps the set of partitions this node serves: those the leader
// assigned to it, plus those of every down node it stands in for (per the
// pgsched.partitions view, which the leader's writes and the node leases
// determine). When it starts standing in for a node it gives that node's
// in-flight tasks back to their ordering_ids at once.
type Duties struct {
	cfg   DutiesConfig
	parts atomic.Pointer[[]int32]

	mu       sync.Mutex
	served   map[int32]string // partition -> owner it is served for
	standing map[string]bool  // down nodes stood in for
	rescued  map[string]bool  // down nodes whose tasks were given back
}

// NewDuties validates cfg and returns a watcher; Run starts it.
func NewDuties(cfg DutiesConfig) (*Duties, error) {
	if cfg.Node == nil || cfg.Store == nil || cfg.DB == nil {
		return nil, errors.New("lease: duties need a node, a store and a db")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Duties{cfg: cfg, served: map[int32]string{}, standing: map[string]bool{}, rescued: map[string]bool{}}
	d.parts.Store(&[]int32{})
	return d, nil
}

// Partitions returns the partitions this node serves, sorted. Safe for
// concurrent use; the slice must not be modified.
func (d *Duties) Partitions() []int32 { return *d.parts.Load() }

// Run refreshes until ctx ends.
func (d *Duties) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-d.cfg.Wake:
		}
		next, err := d.Refresh(ctx)
		if err != nil && ctx.Err() == nil {
			d.cfg.Logger.Warn("refreshing partition duties failed", "error", err)
		}
		timer.Reset(next)
	}
}

// Refresh reads this node's duties once and returns when to look again.
func (d *Duties) Refresh(ctx context.Context) (time.Duration, error) {
	next := d.cfg.Interval
	if d.cfg.Node.Current() == nil {
		// Without a lease nothing is claimed anyway; keep the last view.
		return next, nil
	}
	id := d.cfg.Node.ID()
	duties, err := d.cfg.Store.Duties(ctx, d.cfg.DB, id)
	if err != nil {
		return next, err
	}
	standIns, err := d.cfg.Store.StandIns(ctx, d.cfg.DB, id)
	if err != nil {
		return next, err
	}
	backedUp, err := d.cfg.Store.BackedUp(ctx, d.cfg.DB, id)
	if err != nil {
		return next, err
	}
	for _, left := range backedUp {
		if left > 0 {
			// Look again as soon as that lease would run out.
			next = min(next, left+10*time.Millisecond)
		}
	}

	served := make(map[int32]string, len(duties))
	owned := 0
	for _, du := range duties {
		served[du.Partition] = du.Owner
		if du.Owner == id {
			owned++
		}
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	var gained, lost []int32
	for p := range served {
		if _, ok := d.served[p]; !ok {
			gained = append(gained, p)
		}
	}
	for p := range d.served {
		if _, ok := served[p]; !ok {
			lost = append(lost, p)
		}
	}
	slices.Sort(gained)
	slices.Sort(lost)
	if len(gained) > 0 {
		d.cfg.Logger.Info("partitions gained", "partitions", compact(gained), "serving", len(served))
	}
	if len(lost) > 0 {
		d.cfg.Logger.Info("partitions lost", "partitions", compact(lost), "serving", len(served))
	}

	now := make(map[string]bool, len(standIns))
	for _, n := range standIns {
		now[n] = true
		if !d.standing[n] {
			count := 0
			for _, owner := range served {
				if owner == n {
					count++
				}
			}
			d.cfg.Logger.Info("stand-in started", "down_node_id", n, "partitions", count)
		}
	}
	for n := range d.standing {
		if !now[n] {
			d.cfg.Logger.Info("stand-in stopped", "down_node_id", n)
			delete(d.rescued, n)
		}
	}
	d.standing = now
	// Give back the in-flight tasks of every node newly stood in for, in
	// one transaction (rescue_expired leaves a leaving node's tasks alone:
	// its lease is live and it drains them itself).
	var fresh []string
	for _, n := range standIns {
		if !d.rescued[n] {
			fresh = append(fresh, n)
		}
	}
	var rescueErr error
	if len(fresh) > 0 {
		k, err := d.cfg.Store.RescueExpired(ctx, d.cfg.DB, fresh)
		if err != nil {
			rescueErr = fmt.Errorf("giving back the tasks of down nodes %v: %w", fresh, err)
		} else {
			for _, n := range fresh {
				d.rescued[n] = true
			}
			if k > 0 {
				d.cfg.Logger.Info("gave back in-flight tasks of down nodes", "down_node_ids", fresh, "tasks", k)
				if d.cfg.OnRescue != nil {
					d.cfg.OnRescue(k)
				}
			}
		}
	}

	d.served = served
	if len(gained) > 0 || len(lost) > 0 {
		parts := slices.Sorted(maps.Keys(served))
		d.parts.Store(&parts)
		if d.cfg.OnChange != nil {
			d.cfg.OnChange()
		}
	}
	if d.cfg.OnState != nil {
		d.cfg.OnState(DutiesState{Owned: owned, Served: len(served), StandIns: standIns, BackupOf: len(backedUp)})
	}
	return next, rescueErr
}

// compact renders sorted partition numbers as ranges: "0-3,7,9-10".
func compact(ps []int32) string {
	var b []byte
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "%d", ps[i])
		if j > i {
			b = fmt.Appendf(b, "-%d", ps[j])
		}
		i = j + 1
	}
	return string(b)
}
