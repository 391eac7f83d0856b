package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/store"
)

func recurringDef(name, spec string) store.RecurringDef {
	return store.RecurringDef{Name: name, Spec: spec, TimeZone: "UTC", Kind: "beat", Missed: "one", Payload: []byte(`{"v": 1}`)}
}

func recurringNamed(t *testing.T, f Fixture, name string) (store.RecurringInfo, bool) {
	t.Helper()
	list, err := f.Store.RecurringList(ctx, f.Pool)
	require.NoError(t, err)
	i := slices.IndexFunc(list, func(r store.RecurringInfo) bool { return r.Name == name })
	if i < 0 {
		return store.RecurringInfo{}, false
	}
	return list[i], true
}

// recurringDefinitions: a schedule is created, then changed, paused,
// resumed and deleted, each answering whether it changed anything; a spec
// that does not parse is refused; the list shows each as defined, by name.
func recurringDefinitions(t *testing.T, f Fixture) {
	res, err := f.Store.RecurringUpsert(ctx, f.Pool, recurringDef("b-nightly", "0 3 * * *"))
	require.NoError(t, err)
	require.Equal(t, "inserted", res)
	changed := recurringDef("b-nightly", "30 4 * * *")
	changed.TimeZone, changed.Kind, changed.Missed, changed.Payload = "Europe/Paris", "report", "all", []byte(`{"v": 2}`)
	res, err = f.Store.RecurringUpsert(ctx, f.Pool, changed)
	require.NoError(t, err)
	require.Equal(t, "updated", res)
	_, err = f.Store.RecurringUpsert(ctx, f.Pool, recurringDef("bad", "not a spec"))
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = f.Store.RecurringUpsert(ctx, f.Pool, recurringDef("a-hourly", "@every 1h"))
	require.NoError(t, err)

	list, err := f.Store.RecurringList(ctx, f.Pool)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "a-hourly", list[0].Name, "by name")
	got := list[1]
	require.Equal(t, store.RecurringDef{Name: "b-nightly", Spec: "30 4 * * *", TimeZone: "Europe/Paris", Kind: "report", Missed: "all"},
		store.RecurringDef{Name: got.Name, Spec: got.Spec, TimeZone: got.TimeZone, Kind: got.Kind, Missed: got.Missed})
	require.JSONEq(t, `{"v": 2}`, string(got.Payload))
	require.False(t, got.Paused)
	require.True(t, got.LastRunAt.IsZero(), "never ran")
	require.Empty(t, got.LastResult)

	for _, step := range []struct {
		name string
		op   func() (bool, error)
		want bool
	}{
		{"pause", func() (bool, error) { return f.Store.RecurringPause(ctx, f.Pool, "b-nightly") }, true},
		{"pause again", func() (bool, error) { return f.Store.RecurringPause(ctx, f.Pool, "b-nightly") }, false},
	} {
		ok, err := step.op()
		require.NoError(t, err, step.name)
		require.Equal(t, step.want, ok, step.name)
	}
	paused, err := f.Store.RecurringPaused(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, []string{"b-nightly"}, paused)
	info, _ := recurringNamed(t, f, "b-nightly")
	require.True(t, info.Paused)
	ok, err := f.Store.RecurringResume(ctx, f.Pool, "b-nightly")
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = f.Store.RecurringResume(ctx, f.Pool, "b-nightly")
	require.NoError(t, err)
	require.False(t, ok, "not paused")
	paused, err = f.Store.RecurringPaused(ctx, f.Pool)
	require.NoError(t, err)
	require.Empty(t, paused)
	ok, err = f.Store.RecurringDelete(ctx, f.Pool, "b-nightly")
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = f.Store.RecurringDelete(ctx, f.Pool, "b-nightly")
	require.NoError(t, err)
	require.False(t, ok, "no such schedule")
	_, found := recurringNamed(t, f, "b-nightly")
	require.False(t, found)
}

// recurringMaterialize: a schedule's ticks are created by compare and set
// on its next tick: of two calls expecting the same next tick, one
// creates the ticks and moves it on, the other changes nothing; a paused
// schedule gets none. Each tick is a task of the schedule's kind and
// payload keyed by its time, a past one (a catch-up) due now. Only
// schedules due within the horizon are listed for it.
func recurringMaterialize(t *testing.T, f Fixture) {
	_, err := f.Store.RecurringUpsert(ctx, f.Pool, recurringDef("r", "@every 1h"))
	require.NoError(t, err)
	due, err := f.Store.RecurringDueWithin(ctx, f.Pool, time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, due, 1, "a new schedule: its next tick is not computed yet")
	require.Equal(t, "r", due[0].Name)
	require.Nil(t, due[0].NextTick)
	require.Nil(t, due[0].FailingSince)
	require.WithinDuration(t, time.Now(), due[0].DBNow, time.Minute)

	hour := time.Now().UTC().Truncate(time.Hour)
	past, next, later := hour, hour.Add(time.Hour), hour.Add(2*time.Hour)
	n, err := f.Store.RecurringMaterialize(ctx, f.Pool, "r", nil, later, []time.Time{past, next})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = f.Store.RecurringMaterialize(ctx, f.Pool, "r", nil, later, []time.Time{past, next})
	require.NoError(t, err)
	require.Equal(t, -1, n, "the next tick moved on: the second call changes nothing")
	listed, err := f.Store.ListTasks(ctx, f.Pool, store.TaskFilter{OrderingID: "r", Limit: 10})
	require.NoError(t, err)
	require.Len(t, listed, 2, "each tick once")
	require.Equal(t, "tick "+past.Format(time.RFC3339), listed[0].UniquenessKey)
	require.WithinDuration(t, time.Now(), listed[0].ScheduledAt, time.Minute, "a past tick runs now")
	require.Equal(t, "tick "+next.Format(time.RFC3339), listed[1].UniquenessKey)
	require.True(t, listed[1].ScheduledAt.Equal(next), "a tick ahead runs at its time")
	for _, l := range listed {
		require.Equal(t, "beat", l.Kind)
		require.JSONEq(t, `{"v": 1}`, string(l.Payload))
	}
	require.Equal(t, 2, count(t, f, "SELECT count(*) FROM {s}.heads WHERE ordering_id = 'r' AND tick")+
		count(t, f, "SELECT count(*) FROM {s}.backlog WHERE ordering_id = 'r' AND tick"), "marked as ticks")
	info, _ := recurringNamed(t, f, "r")
	require.True(t, info.NextRunAt.Equal(listed[0].ScheduledAt) || info.NextRunAt.Equal(next), "next run: %s", info.NextRunAt)

	due, err = f.Store.RecurringDueWithin(ctx, f.Pool, time.Minute, 10)
	require.NoError(t, err)
	require.Empty(t, due, "its next tick is beyond the horizon")
	due, err = f.Store.RecurringDueWithin(ctx, f.Pool, 3*time.Hour, 10)
	require.NoError(t, err)
	require.Len(t, due, 1)
	require.True(t, due[0].NextTick.Equal(later))

	n, err = f.Store.RecurringMaterialize(ctx, f.Pool, "r", &later, later.Add(time.Hour), []time.Time{later})
	require.NoError(t, err)
	require.Equal(t, 1, n, "expecting the next tick it has: works")
	_, err = f.Store.RecurringPause(ctx, f.Pool, "r")
	require.NoError(t, err)
	moved := later.Add(time.Hour)
	n, err = f.Store.RecurringMaterialize(ctx, f.Pool, "r", &moved, moved.Add(time.Hour), []time.Time{moved})
	require.NoError(t, err)
	require.Equal(t, -1, n, "a paused schedule gets no ticks")
	due, err = f.Store.RecurringDueWithin(ctx, f.Pool, 24*time.Hour, 10)
	require.NoError(t, err)
	require.Empty(t, due, "nor is it listed")
}

// recurringSetAside: a schedule whose ticks cannot be made is set aside
// with its error until its retry falls due, unless it changed since it
// was read; the count and the list show it; ticks made again clear it.
func recurringSetAside(t *testing.T, f Fixture) {
	for _, n := range []string{"broken", "changed"} {
		_, err := f.Store.RecurringUpsert(ctx, f.Pool, recurringDef(n, "@every 1h"))
		require.NoError(t, err)
	}
	due, err := f.Store.RecurringDueWithin(ctx, f.Pool, time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, due, 2)
	read := map[string]time.Time{}
	for _, d := range due {
		read[d.Name] = d.UpdatedAt
	}
	changed := recurringDef("changed", "@every 2h")
	_, err = f.Store.RecurringUpsert(ctx, f.Pool, changed)
	require.NoError(t, err)

	failed := []store.RecurringFailure{{Name: "broken", UpdatedAt: read["broken"], Error: "boom"},
		{Name: "changed", UpdatedAt: read["changed"], Error: "stale"}}
	rows, err := f.Store.RecurringSetAside(ctx, f.Pool, failed, time.Hour, 2*time.Hour)
	require.NoError(t, err)
	require.Len(t, rows, 1, "the changed one is left alone")
	require.Equal(t, "broken", rows[0].Name)
	require.True(t, rows[0].Newly)
	require.WithinDuration(t, time.Now().Add(time.Hour), rows[0].RetryAt, time.Minute, "retried after at least min")
	n, err := f.Store.RecurringSetAsideCount(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	info, _ := recurringNamed(t, f, "broken")
	require.Equal(t, "boom", info.Error)
	require.WithinDuration(t, time.Now(), info.FailingSince, time.Minute)
	due, err = f.Store.RecurringDueWithin(ctx, f.Pool, time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, due, 1, "set aside until its retry")
	require.Equal(t, "changed", due[0].Name)

	rows, err = f.Store.RecurringSetAside(ctx, f.Pool, failed[:1], time.Hour, 2*time.Hour)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.False(t, rows[0].Newly, "failing already")

	// Its retry falls due: listed after the ones that work.
	exec(t, f, "UPDATE "+f.Store.Schema()+".recurring_schedules SET retry_at = now() - interval '1 second' WHERE name = 'broken'")
	due, err = f.Store.RecurringDueWithin(ctx, f.Pool, time.Minute, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"changed", "broken"}, []string{due[0].Name, due[1].Name})
	require.NotNil(t, due[1].FailingSince)
	next := time.Now().Add(time.Hour)
	created, err := f.Store.RecurringMaterialize(ctx, f.Pool, "broken", nil, next, nil)
	require.NoError(t, err)
	require.Zero(t, created)
	n, err = f.Store.RecurringSetAsideCount(ctx, f.Pool)
	require.NoError(t, err)
	require.Zero(t, n, "works again")
	info, _ = recurringNamed(t, f, "broken")
	require.Empty(t, info.Error)
	require.True(t, info.FailingSince.IsZero())
}
