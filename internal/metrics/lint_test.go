package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/require"
)

// TestPromlint lints every metric a worker and a client register, with a
// series in each labelled one (an empty vector is not served, so not
// linted), as Prometheus's own promlint does.
func TestPromlint(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg)
	require.NoError(t, err)
	scheduled, err := Scheduled(reg)
	require.NoError(t, err)
	m.Executed.WithLabelValues("k", "completed").Inc()
	m.Retried.WithLabelValues("k").Inc()
	m.Dead.WithLabelValues("k").Inc()
	m.Duration.WithLabelValues("k").Observe(0.1)
	m.BuildInfo.WithLabelValues("v1.0.0", "go1.26").Set(1)
	m.RecurringTicks.WithLabelValues("on_time").Inc()
	scheduled.WithLabelValues("inserted").Inc()
	m.KindCounts.Set([]KindCount{{Kind: "k", Pending: 1, Due: 1, OldestDueSeconds: 2}})

	mfs, err := reg.Gather()
	require.NoError(t, err)
	names := make([]string, len(mfs))
	for i, mf := range mfs {
		names[i] = mf.GetName()
	}
	require.Len(t, names, 32, "every metric is gathered: %v", names)
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	require.NoError(t, err)
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
