package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxKinds is how many distinct task kinds get a label value of their own;
// OtherKind labels the rest.
//
// Kinds are chosen by whoever enqueues, and every label value is a series
// that the process and Prometheus keep forever: unbounded, ten thousand
// kinds make /metrics 10.8 MB instead of 25 KB. The first MaxKinds kinds a
// worker sees keep their names, which covers any installation with a fixed
// set of handlers.
const MaxKinds = 100

// OtherKind is the kind label of every kind beyond the first MaxKinds.
const OtherKind = "_other"

// Kinds maps task kinds to bounded label values: the first MaxKinds
// distinct kinds seen label themselves, later ones OtherKind. Safe for
// concurrent use; a kind already seen costs one map read.
type Kinds struct {
	max  int
	seen sync.Map // kind -> struct{}
	mu   sync.Mutex
	n    atomic.Int32
}

// NewKinds returns a Kinds keeping at most max kinds (MaxKinds if max <= 0).
func NewKinds(max int) *Kinds {
	if max <= 0 {
		max = MaxKinds
	}
	return &Kinds{max: max}
}

// Label returns the label value for kind.
func (k *Kinds) Label(kind string) string {
	if _, ok := k.seen.Load(kind); ok {
		return kind
	}
	if int(k.n.Load()) >= k.max {
		return OtherKind
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.seen.Load(kind); ok {
		return kind
	}
	if int(k.n.Load()) >= k.max {
		return OtherKind
	}
	k.seen.Store(kind, struct{}{})
	k.n.Add(1)
	return kind
}

// seriesKey names a series of a kind vector with at most one label
// besides the kind: the ones the per-task path asks for.
type seriesKey struct{ kind, lv string }

// series remembers the series a kind vector handed out, by kind and label,
// for kinds that label themselves (at most MaxKinds of them, each with the
// few values a label takes in this package's callers), so that a task's
// metrics cost one map read instead of a label check, a slice and
// Prometheus's hashing of the label values per series. Vectors here are
// never reset, so a remembered series stays the vector's.
type series[M any] struct{ m sync.Map }

func (s *series[M]) get(kinds *Kinds, kind string, lvs []string, resolve func(lvs []string) M) M {
	if len(lvs) > 1 {
		return resolve(withKind(kinds.Label(kind), lvs))
	}
	key := seriesKey{kind: kind}
	if len(lvs) == 1 {
		key.lv = lvs[0]
	}
	if m, ok := s.m.Load(key); ok {
		return m.(M)
	}
	label := kinds.Label(kind)
	m := resolve(withKind(label, lvs))
	if label == kind {
		s.m.Store(key, m)
	}
	return m
}

// KindCounterVec is a counter vector whose first label is the task kind,
// bounded by a Kinds.
type KindCounterVec struct {
	vec    *prometheus.CounterVec
	kinds  *Kinds
	series series[prometheus.Counter]
}

// WithLabelValues returns the counter for kind (as Kinds labels it) and the
// other label values, in the vector's label order.
func (v *KindCounterVec) WithLabelValues(kind string, lvs ...string) prometheus.Counter {
	return v.series.get(v.kinds, kind, lvs, func(lvs []string) prometheus.Counter { return v.vec.WithLabelValues(lvs...) })
}

// Describe implements prometheus.Collector.
func (v *KindCounterVec) Describe(ch chan<- *prometheus.Desc) { v.vec.Describe(ch) }

// Collect implements prometheus.Collector.
func (v *KindCounterVec) Collect(ch chan<- prometheus.Metric) { v.vec.Collect(ch) }

// KindHistogramVec is a histogram vector whose first label is the task
// kind, bounded by a Kinds.
type KindHistogramVec struct {
	vec    *prometheus.HistogramVec
	kinds  *Kinds
	series series[prometheus.Observer]
}

// WithLabelValues returns the observer for kind (as Kinds labels it) and
// the other label values, in the vector's label order.
func (v *KindHistogramVec) WithLabelValues(kind string, lvs ...string) prometheus.Observer {
	return v.series.get(v.kinds, kind, lvs, func(lvs []string) prometheus.Observer { return v.vec.WithLabelValues(lvs...) })
}

// Describe implements prometheus.Collector.
func (v *KindHistogramVec) Describe(ch chan<- *prometheus.Desc) { v.vec.Describe(ch) }

// Collect implements prometheus.Collector.
func (v *KindHistogramVec) Collect(ch chan<- prometheus.Metric) { v.vec.Collect(ch) }

func withKind(kind string, lvs []string) []string {
	switch len(lvs) {
	case 0:
		return []string{kind}
	case 1:
		return []string{kind, lvs[0]}
	}
	return append([]string{kind}, lvs...)
}
