package pgschedui

import (
	"fmt"
	"math"
	"time"

	"github.com/pgsched/pgsched/internal/store"
)

// The overview's charts are SVG drawn on the server: an hour of minutes
// from the throughput history (pgsched.throughput), one bar per minute.
// No script and no chart library: the page stays a document that works
// offline and under a strict Content-Security-Policy, and each bar
// carries its numbers as a tooltip and as data attributes.

const (
	chartW, chartH = 600.0, 120.0
	minutes        = 60
)

type segment struct {
	Class string
	Y, H  float64
}

type bar struct {
	X, W     float64
	Segments []segment
	Title    string
	// Completed, Retried, Dead are the minute's counts, Mean and Max its
	// start lateness in milliseconds.
	Completed, Retried, Dead int64
	Mean, Max                float64
}

type chart struct {
	W, H        float64
	Bars        []bar
	Top         string // the y axis's top value, labelled
	Empty       bool
	From, To    string
	Totals      [4]int64 // completed, retried, dead, snoozed over the hour
	WorstMillis float64
}

// hour lays rows (oldest first, missing minutes absent) out on the last
// sixty minutes ending at now's minute.
func hour(rows []store.StatsMinute, now time.Time) (throughput, lateness chart) {
	end := now.Truncate(time.Minute)
	start := end.Add(-(minutes - 1) * time.Minute)
	byMinute := map[int64]store.StatsMinute{}
	for _, r := range rows {
		byMinute[r.Minute.Unix()] = r
	}
	slot := chartW / minutes
	var maxRate, maxLate float64
	type minute struct {
		r       store.StatsMinute
		seconds float64
	}
	ms := make([]minute, minutes)
	for i := range ms {
		m := start.Add(time.Duration(i) * time.Minute)
		r := byMinute[m.Unix()]
		r.Minute = m
		secs := 60.0
		if i == minutes-1 { // the current minute, so far
			secs = max(now.Sub(end).Seconds(), 1)
		}
		ms[i] = minute{r, secs}
		maxRate = max(maxRate, float64(r.Completed+r.Retried+r.Dead)/secs)
		maxLate = max(maxLate, r.LatenessMax)
	}
	throughput = chart{W: chartW, H: chartH, Empty: maxRate == 0, From: start.UTC().Format("15:04"), To: end.UTC().Format("15:04") + " UTC"}
	lateness = throughput
	lateness.Empty = maxLate == 0
	rateTop, rateLabel := niceTop(maxRate)
	lateTop, lateLabel := niceTop(maxLate * 1000)
	throughput.Top, lateness.Top = rateLabel+"/s", lateLabel+" ms"
	for i, m := range ms {
		x := float64(i)*slot + 1
		w := slot - 2
		r := m.r
		throughput.Totals[0] += r.Completed
		throughput.Totals[1] += r.Retried
		throughput.Totals[2] += r.Dead
		throughput.Totals[3] += r.Snoozed
		b := bar{X: x, W: w, Completed: r.Completed, Retried: r.Retried, Dead: r.Dead,
			Mean: r.LatenessMean * 1000, Max: r.LatenessMax * 1000}
		b.Title = fmt.Sprintf("%s UTC: %d completed, %d retried, %d dead (%.1f/s)", r.Minute.UTC().Format("15:04"),
			r.Completed, r.Retried, r.Dead, float64(r.Completed+r.Retried+r.Dead)/m.seconds)
		if r.Snoozed > 0 {
			b.Title += fmt.Sprintf("; %d snoozed", r.Snoozed)
		}
		y := chartH
		for _, s := range []struct {
			class string
			n     int64
		}{{"completed", r.Completed}, {"retried", r.Retried}, {"dead", r.Dead}} {
			if s.n == 0 || rateTop == 0 {
				continue
			}
			h := float64(s.n) / m.seconds / rateTop * chartH
			y -= h
			b.Segments = append(b.Segments, segment{Class: s.class, Y: y, H: h})
		}
		throughput.Bars = append(throughput.Bars, b)

		l := bar{X: x, W: w, Mean: r.LatenessMean * 1000, Max: r.LatenessMax * 1000}
		l.Title = fmt.Sprintf("%s UTC: %d started, lateness mean %.1f ms, worst %.1f ms", r.Minute.UTC().Format("15:04"),
			r.Started, l.Mean, l.Max)
		if r.Started > 0 && lateTop > 0 {
			hMax := l.Max / lateTop * chartH
			hMean := l.Mean / lateTop * chartH
			l.Segments = []segment{{Class: "worst", Y: chartH - hMax, H: hMax}, {Class: "mean", Y: chartH - hMean, H: hMean}}
		}
		lateness.Bars = append(lateness.Bars, l)
		lateness.WorstMillis = max(lateness.WorstMillis, l.Max)
	}
	return throughput, lateness
}

// niceTop rounds v up to 1, 2 or 5 times a power of ten for the axis.
func niceTop(v float64) (float64, string) {
	if v <= 0 {
		return 0, "0"
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			top := m * p
			return top, fmt.Sprintf("%g", top)
		}
	}
	return 10 * p, fmt.Sprintf("%g", 10*p)
}
