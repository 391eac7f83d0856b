package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// KindCount is one kind's tasks as the leader last counted them: pending
// (of those, due), running and dead, how long the oldest due task had
// waited past its time, in seconds (0 when none was due), and how many
// pending ones a limit holds back.
type KindCount struct {
	Kind                        string
	Pending, Due, Running, Dead int64
	OldestDueSeconds            float64
	Held                        int64
}

// KindCounts exports the leader's last count per kind: the queue depth
// and wait time dashboards and alerts read per kind. The node reads the
// count now and then and Sets it here; a scrape formats what was Set and
// reads nothing from the database, so scrapes cost nothing however often
// they come. Every node exports the same cluster-wide figures.
type KindCounts struct {
	kinds  *Kinds
	tasks  *prometheus.Desc
	oldest *prometheus.Desc
	last   atomic.Pointer[[]KindCount]
}

func newKindCounts(kinds *Kinds) *KindCounts {
	return &KindCounts{
		kinds: kinds,
		tasks: prometheus.NewDesc("pgsched_kind_tasks",
			"Tasks in the whole schema by kind and state (pending, due: pending and past their time, running, dead, held: pending and held back by the kind's limit), as the leader last counted them (every CountInterval); the same on every node."+kindHelp,
			[]string{"kind", "state"}, nil),
		oldest: prometheus.NewDesc("pgsched_kind_oldest_due_seconds",
			"How long the kind's oldest due task had waited past its scheduled time when the leader last counted (0: none due); the kind's wait. The same on every node."+kindHelp,
			[]string{"kind"}, nil),
	}
}

// Set replaces the exported counts with counts, kinds beyond the labelled
// ones summed under OtherKind (their wait the longest of them).
func (k *KindCounts) Set(counts []KindCount) {
	byLabel := make(map[string]int, len(counts))
	out := make([]KindCount, 0, len(counts))
	for _, c := range counts {
		label := k.kinds.Label(c.Kind)
		i, ok := byLabel[label]
		if !ok {
			byLabel[label] = len(out)
			out = append(out, KindCount{Kind: label})
			i = len(out) - 1
		}
		o := &out[i]
		o.Pending += c.Pending
		o.Due += c.Due
		o.Running += c.Running
		o.Dead += c.Dead
		o.Held += c.Held
		o.OldestDueSeconds = max(o.OldestDueSeconds, c.OldestDueSeconds)
	}
	k.last.Store(&out)
}

// Describe implements prometheus.Collector.
func (k *KindCounts) Describe(ch chan<- *prometheus.Desc) {
	ch <- k.tasks
	ch <- k.oldest
}

// Collect implements prometheus.Collector.
func (k *KindCounts) Collect(ch chan<- prometheus.Metric) {
	last := k.last.Load()
	if last == nil {
		return
	}
	for _, c := range *last {
		for _, s := range []struct {
			state string
			n     int64
		}{{"pending", c.Pending}, {"due", c.Due}, {"running", c.Running}, {"dead", c.Dead}, {"held", c.Held}} {
			ch <- prometheus.MustNewConstMetric(k.tasks, prometheus.GaugeValue, float64(s.n), c.Kind, s.state)
		}
		ch <- prometheus.MustNewConstMetric(k.oldest, prometheus.GaugeValue, c.OldestDueSeconds, c.Kind)
	}
}
