package main

import (
	"context"
	"io"
	"maps"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/localpg"
)

// TestSettingsOutOfRange: every setting the worker cannot work with as
// meant (a value out of its range, not of its type, or an explicit 0 where
// 0 means nothing sensible) ends run() at once with an error naming the
// variable, its flag and what is accepted; and nothing has started: not a
// word printed (no start-up line, no "http listening"), the HTTP address
// (held by the test, so reaching the listen would fail otherwise) not
// tried, the database address never dialled, and without DATABASE_URL no
// local PostgreSQL created in the data directory.
func TestSettingsOutOfRange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want []string // each in the error
	}{
		{"concurrency overflowing int32", map[string]string{"PGSCHED_CONCURRENCY": "1073741824"}, nil,
			[]string{"PGSCHED_CONCURRENCY (-concurrency) must be between 1 and 10000, got 1073741824"}},
		{"concurrency beyond int64", map[string]string{"PGSCHED_CONCURRENCY": "99999999999999999999"}, nil,
			[]string{`PGSCHED_CONCURRENCY (-concurrency) must be a whole number between 1 and 10000, got "99999999999999999999"`}},
		{"concurrency 0", map[string]string{"PGSCHED_CONCURRENCY": "0"}, nil,
			[]string{"PGSCHED_CONCURRENCY (-concurrency) must be between 1 and 10000, got 0"}},
		{"concurrency negative", map[string]string{"PGSCHED_CONCURRENCY": "-1"}, nil,
			[]string{"PGSCHED_CONCURRENCY (-concurrency) must be between 1 and 10000, got -1"}},
		{"concurrency not a number", map[string]string{"PGSCHED_CONCURRENCY": "many"}, nil,
			[]string{`PGSCHED_CONCURRENCY (-concurrency) must be a whole number between 1 and 10000, got "many"`}},
		{"concurrency flag", nil, []string{"-concurrency", "20000"},
			[]string{"PGSCHED_CONCURRENCY (-concurrency) must be between 1 and 10000, got 20000"}},
		{"prefetch beyond max", map[string]string{"PGSCHED_PREFETCH": "10001"}, nil,
			[]string{"PGSCHED_PREFETCH (-prefetch) must be at most 10000, got 10001"}},
		{"prefetch not a number", map[string]string{"PGSCHED_PREFETCH": "lots"}, nil,
			[]string{`PGSCHED_PREFETCH (-prefetch) must be a whole number at most 10000, got "lots"`}},
		{"max attempts negative", map[string]string{"PGSCHED_MAX_ATTEMPTS": "-2"}, nil,
			[]string{"PGSCHED_MAX_ATTEMPTS (-max-attempts) must be between 0 and 10000, got -2"}},
		{"max attempts beyond max", map[string]string{"PGSCHED_MAX_ATTEMPTS": "10001"}, nil,
			[]string{"PGSCHED_MAX_ATTEMPTS (-max-attempts) must be between 0 and 10000, got 10001"}},
		{"lease ttl 0", map[string]string{"PGSCHED_LEASE_TTL": "0"}, nil,
			[]string{"PGSCHED_LEASE_TTL (-lease-ttl) must be between 1s and 10m, got 0s"}},
		{"lease ttl 1ms", map[string]string{"PGSCHED_LEASE_TTL": "1ms"}, nil,
			[]string{"PGSCHED_LEASE_TTL (-lease-ttl) must be between 1s and 10m, got 1ms"}},
		{"lease ttl 1000000h", map[string]string{"PGSCHED_LEASE_TTL": "1000000h"}, nil,
			[]string{"PGSCHED_LEASE_TTL (-lease-ttl) must be between 1s and 10m, got 1000000h"}},
		{"lease ttl not a duration", map[string]string{"PGSCHED_LEASE_TTL": "soon"}, nil,
			[]string{`PGSCHED_LEASE_TTL (-lease-ttl) must be a duration between 1s and 10m, got "soon"`}},
		{"lease ttl flag 0", nil, []string{"-lease-ttl", "0"},
			[]string{"PGSCHED_LEASE_TTL (-lease-ttl) must be between 1s and 10m, got 0s"}},
		{"poll interval 1ns", map[string]string{"PGSCHED_POLL_INTERVAL": "1ns"}, nil,
			[]string{"PGSCHED_POLL_INTERVAL (-poll-interval) must be between 10ms and 10m, got 1ns"}},
		{"poll interval 0", map[string]string{"PGSCHED_POLL_INTERVAL": "0s"}, nil,
			[]string{"PGSCHED_POLL_INTERVAL (-poll-interval) must be between 10ms and 10m, got 0s"}},
		{"poll interval 11m", map[string]string{"PGSCHED_POLL_INTERVAL": "11m"}, nil,
			[]string{"PGSCHED_POLL_INTERVAL (-poll-interval) must be between 10ms and 10m, got 11m"}},
		{"drain timeout 0", map[string]string{"PGSCHED_DRAIN_TIMEOUT": "0"}, nil,
			[]string{"PGSCHED_DRAIN_TIMEOUT (-drain-timeout) must be between 1s and 1h, got 0s"}},
		{"drain timeout negative", map[string]string{"PGSCHED_DRAIN_TIMEOUT": "-1s"}, nil,
			[]string{"PGSCHED_DRAIN_TIMEOUT (-drain-timeout) must be between 1s and 1h, got -1s"}},
		{"drain timeout 2h", map[string]string{"PGSCHED_DRAIN_TIMEOUT": "2h"}, nil,
			[]string{"PGSCHED_DRAIN_TIMEOUT (-drain-timeout) must be between 1s and 1h, got 2h"}},
		{"flex down 0", map[string]string{"PGSCHED_FLEX_DOWN": "0"}, nil,
			[]string{"PGSCHED_FLEX_DOWN (-flex-down) must be between 1s and 24h, got 0s"}},
		{"flex down 25h", map[string]string{"PGSCHED_FLEX_DOWN": "25h"}, nil,
			[]string{"PGSCHED_FLEX_DOWN (-flex-down) must be between 1s and 24h, got 25h"}},
		{"webhook timeout 0", map[string]string{"PGSCHED_WEBHOOK_TIMEOUT": "0"}, nil,
			[]string{"PGSCHED_WEBHOOK_TIMEOUT (-webhook-timeout) must be between 100ms and 1h, got 0s"}},
		{"webhook timeout negative", map[string]string{"PGSCHED_WEBHOOK_TIMEOUT": "-1s"}, nil,
			[]string{"PGSCHED_WEBHOOK_TIMEOUT (-webhook-timeout) must be between 100ms and 1h, got -1s"}},
		{"webhook timeout 2h", map[string]string{"PGSCHED_WEBHOOK_TIMEOUT": "2h"}, nil,
			[]string{"PGSCHED_WEBHOOK_TIMEOUT (-webhook-timeout) must be between 100ms and 1h, got 2h"}},
		{"log format xml", map[string]string{"PGSCHED_LOG_FORMAT": "xml"}, nil,
			[]string{`PGSCHED_LOG_FORMAT (-log-format) must be text or json, got "xml"`}},
		{"http port over 65535", map[string]string{"PGSCHED_HTTP_ADDR": "127.0.0.1:65536"}, nil,
			[]string{`PGSCHED_HTTP_ADDR (-http-addr) must be host:port`, `with a port between 1 and 65535, got "127.0.0.1:65536"`}},
		{"http port 0", map[string]string{"PGSCHED_HTTP_ADDR": ":0"}, nil,
			[]string{`PGSCHED_HTTP_ADDR (-http-addr) must be host:port`, `got ":0"`}},
		{"http no port", map[string]string{"PGSCHED_HTTP_ADDR": "127.0.0.1"}, nil,
			[]string{`PGSCHED_HTTP_ADDR (-http-addr) must be host:port`, `got "127.0.0.1"`}},
		{"http service name", map[string]string{"PGSCHED_HTTP_ADDR": "127.0.0.1:http"}, nil,
			[]string{`PGSCHED_HTTP_ADDR (-http-addr) must be host:port`, `got "127.0.0.1:http"`}},
		{"http flag empty", nil, []string{"-http-addr", ""},
			[]string{`PGSCHED_HTTP_ADDR (-http-addr) must be host:port`, `got ""`}},
		{"migrate yes", map[string]string{"PGSCHED_MIGRATE": "yes"}, nil,
			[]string{`PGSCHED_MIGRATE (-migrate) must be true or false (or 1, 0, t, f), got "yes"`}},
		{"console off", map[string]string{"PGSCHED_CONSOLE": "off"}, nil,
			[]string{`PGSCHED_CONSOLE (-console) must be true or false (or 1, 0, t, f), got "off"`}},
		{"node id not UTF-8", map[string]string{"PGSCHED_NODE_ID": "node-\xff"}, nil,
			[]string{`PGSCHED_NODE_ID (-node-id) must be at most 255 bytes of UTF-8 text without control characters, got "node-\xff"`}},
		{"node id with a newline", map[string]string{"PGSCHED_NODE_ID": "node\n1"}, nil,
			[]string{`PGSCHED_NODE_ID (-node-id) must be at most 255 bytes`, `got "node\n1"`}},
		{"node id too long", map[string]string{"PGSCHED_NODE_ID": strings.Repeat("n", 256)}, nil,
			[]string{`PGSCHED_NODE_ID (-node-id) must be at most 255 bytes`, `got 256 bytes`}},
		{"secret without routes", map[string]string{"PGSCHED_WEBHOOK_SECRET": "whsec_c2hvcnQ="}, nil,
			[]string{"PGSCHED_WEBHOOK_SECRET (-webhook-secret): webhook: secret 1: the key is 5 bytes"}},
		{"two at once", map[string]string{"PGSCHED_LEASE_TTL": "0", "PGSCHED_LOG_FORMAT": "xml"}, nil,
			[]string{"PGSCHED_LEASE_TTL (-lease-ttl) must be between 1s and 10m, got 0s", `PGSCHED_LOG_FORMAT (-log-format) must be text or json, got "xml"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The database address accepts connections and counts them.
			db, err := localpg.Listen()
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			var dialled atomic.Int32
			go func() {
				for {
					c, err := db.Accept()
					if err != nil {
						return
					}
					dialled.Add(1)
					_ = c.Close()
				}
			}()
			// The HTTP address is taken: reaching the listen would fail
			// with another error than the one wanted.
			held, err := localpg.Listen()
			require.NoError(t, err)
			t.Cleanup(func() { _ = held.Close() })
			dataDir := t.TempDir()

			for _, dbURL := range []string{"postgres://nobody@" + db.Addr().String() + "/none?sslmode=disable", ""} {
				env := map[string]string{"DATABASE_URL": dbURL, "PGSCHED_HTTP_ADDR": held.Addr().String(), "PGSCHED_DATA_DIR": dataDir}
				maps.Copy(env, tc.env)
				// A worker that started would retry until this ends, then
				// return nil.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				var out syncBuffer
				err := run(ctx, tc.args, func(k string) string { return env[k] }, &out, &out)
				cancel()
				require.Error(t, err, "DATABASE_URL=%q", dbURL)
				for _, w := range tc.want {
					require.ErrorContains(t, err, w, "DATABASE_URL=%q", dbURL)
				}
				require.Empty(t, out.String(), "nothing printed: nothing started")
			}
			require.Zero(t, dialled.Load(), "the database was not dialled")
			entries, err := os.ReadDir(dataDir)
			require.NoError(t, err)
			require.Empty(t, entries, "no local PostgreSQL was created")
		})
	}
}

// TestParseBooleans: PGSCHED_MIGRATE and PGSCHED_CONSOLE accept exactly
// what strconv.ParseBool does, 0 being false; unset is true. Anything
// else is TestSettingsOutOfRange's.
func TestParseBooleans(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]bool{
		"": true, "1": true, "t": true, "T": true, "true": true, "TRUE": true, "True": true,
		"0": false, "f": false, "F": false, "false": false, "FALSE": false, "False": false,
	} {
		for _, env := range []string{"PGSCHED_MIGRATE", "PGSCHED_CONSOLE"} {
			o, err := parse(nil, func(k string) string { return map[string]string{env: value}[k] }, io.Discard)
			require.NoError(t, err, "%s=%q", env, value)
			got := map[string]bool{"PGSCHED_MIGRATE": o.migrate, "PGSCHED_CONSOLE": o.console}[env]
			require.Equal(t, want, got, "%s=%q", env, value)
		}
	}
	o, err := parse([]string{"-migrate=0", "-console=false"}, func(k string) string { return "" }, io.Discard)
	require.NoError(t, err)
	require.False(t, o.migrate, "-migrate=0")
	require.False(t, o.console, "-console=false")
}
