package metrics

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

func TestKindsBounded(t *testing.T) {
	t.Parallel()
	k := NewKinds(3)
	for _, kind := range []string{"a", "b", "a", "c"} {
		if got := k.Label(kind); got != kind {
			t.Fatalf("Label(%q) = %q, want its own name", kind, got)
		}
	}
	if got := k.Label("d"); got != OtherKind {
		t.Fatalf("Label(d) = %q, want %q", got, OtherKind)
	}
	if got := k.Label("b"); got != "b" {
		t.Fatalf("a kind seen early keeps its label: got %q", got)
	}
}

func TestKindsConcurrent(t *testing.T) {
	t.Parallel()
	k := NewKinds(50)
	var wg sync.WaitGroup
	var mu sync.Mutex
	own := map[string]bool{}
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				kind := fmt.Sprintf("k%d", (i*7+g)%200)
				if l := k.Label(kind); l != OtherKind {
					mu.Lock()
					own[l] = true
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(own) != 50 {
		t.Fatalf("%d kinds got their own label, want exactly 50", len(own))
	}
}

func TestMetricsKindLabelBounded(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10_000 {
		kind := fmt.Sprintf("kind-%d", i)
		m.Executed.WithLabelValues(kind, "completed").Inc()
		m.Retried.WithLabelValues(kind).Inc()
		m.Dead.WithLabelValues(kind).Inc()
		m.Duration.WithLabelValues(kind).Observe(0.01)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	byKind := map[string]float64{}
	for _, mf := range mfs {
		series[mf.GetName()] = len(mf.GetMetric())
		if mf.GetName() != "pgsched_tasks_executed_total" {
			continue
		}
		if !strings.Contains(mf.GetHelp(), `"_other"`) {
			t.Errorf("help does not explain the _other label: %q", mf.GetHelp())
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "kind" {
					byKind[l.GetValue()] = mt.GetCounter().GetValue()
				}
			}
		}
	}
	for _, name := range []string{"pgsched_tasks_executed_total", "pgsched_tasks_retried_total", "pgsched_tasks_dead_total", "pgsched_task_run_duration_seconds"} {
		if series[name] != MaxKinds+1 {
			t.Errorf("%s: %d series, want %d", name, series[name], MaxKinds+1)
		}
	}
	if got := byKind[OtherKind]; got != 10_000-MaxKinds {
		t.Errorf("_other counts %v runs, want %d", got, 10_000-MaxKinds)
	}
	if got := byKind["kind-7"]; got != 1 {
		t.Errorf("an early kind counts %v, want 1", got)
	}
}

// TestKindCountsBounded: kinds beyond the labelled ones are exported
// summed under _other, with the longest wait among them; a new Set
// replaces the last one whole (a kind that vanished is no longer
// exported).
func TestKindCountsBounded(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg)
	require.NoError(t, err)
	var counts []KindCount
	for i := range MaxKinds + 5 {
		counts = append(counts, KindCount{Kind: fmt.Sprintf("kind-%03d", i), Pending: 2, Due: 1, Dead: 1, OldestDueSeconds: float64(i)})
	}
	m.KindCounts.Set(counts)
	read := func() (map[string]float64, map[string]float64) {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		due, wait := map[string]float64{}, map[string]float64{}
		for _, mf := range mfs {
			for _, mt := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range mt.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				switch {
				case mf.GetName() == "pgsched_kind_tasks" && labels["state"] == "due":
					due[labels["kind"]] = mt.GetGauge().GetValue()
				case mf.GetName() == "pgsched_kind_oldest_due_seconds":
					wait[labels["kind"]] = mt.GetGauge().GetValue()
				}
			}
		}
		return due, wait
	}
	due, wait := read()
	require.Len(t, due, MaxKinds+1)
	require.Equal(t, 5.0, due[OtherKind], "the five kinds past the bound are summed")
	require.Equal(t, float64(MaxKinds+4), wait[OtherKind], "with the longest wait among them")
	require.Equal(t, 1.0, due["kind-007"])
	require.Equal(t, 7.0, wait["kind-007"])

	m.KindCounts.Set([]KindCount{{Kind: "kind-001", Due: 3}})
	due, _ = read()
	require.Equal(t, map[string]float64{"kind-001": 3}, due)
}
