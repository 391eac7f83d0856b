package pgtest

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func TestServerURL(t *testing.T) {
	u := ServerURL(t)
	if u2 := ServerURL(t); u2 != u {
		t.Fatalf("ServerURL changed between calls: %q then %q", u, u2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	var version string
	if err := conn.QueryRow(ctx, "select version()").Scan(&version); err != nil {
		t.Fatalf("select version(): %v", err)
	}
	if !strings.HasPrefix(version, "PostgreSQL ") {
		t.Fatalf("version() = %q", version)
	}
	t.Logf("server: %s", version)
}

func TestServerURLConcurrent(t *testing.T) {
	want := ServerURL(t)
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			if got := ServerURL(t); got != want {
				t.Errorf("ServerURL = %q, want %q", got, want)
			}
		})
	}
}

var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func checkIdent(t *testing.T, name string) {
	t.Helper()
	if len(name) > maxIdentLen {
		t.Errorf("%q is %d bytes, want <= %d", name, len(name), maxIdentLen)
	}
	if !identRE.MatchString(name) {
		t.Errorf("%q is not a plain lowercase SQL identifier", name)
	}
	if strings.Contains(name, "__") {
		t.Errorf("%q contains a double underscore", name)
	}
}

func TestUniqueName(t *testing.T) {
	seen := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				n := UniqueName(t, "sched")
				mu.Lock()
				if seen[n] {
					t.Errorf("duplicate name %q", n)
				}
				seen[n] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for n := range seen {
		checkIdent(t, n)
		if !strings.HasPrefix(n, "sched_testuniquename_") {
			t.Fatalf("%q lacks prefix and test name", n)
		}
		break
	}

	cases := []struct{ prefix, wantPrefix string }{
		{"Lease", "lease_"},
		{"9lives", "t_9lives_"},
		{"", "t_"},
		{"--Weird Prefix!!", "weird_prefix_"},
		{"ünïcode", "n_code_"},
		{strings.Repeat("p", 100), strings.Repeat("p", maxIdentLen-9) + "_"},
	}
	for _, c := range cases {
		n := UniqueName(t, c.prefix)
		checkIdent(t, n)
		if !strings.HasPrefix(n, c.wantPrefix) {
			t.Errorf("UniqueName(%q) = %q, want prefix %q", c.prefix, n, c.wantPrefix)
		}
	}

	t.Run("Sub/Test With Spaces & a very long name that will not fit into sixty-three bytes at all", func(t *testing.T) {
		n := UniqueName(t, "db")
		checkIdent(t, n)
		if !strings.HasPrefix(n, "db_testuniquename_sub_test_with_spaces") {
			t.Errorf("subtest name = %q", n)
		}
	})
}

func TestFreshName(t *testing.T) {
	a, b := FreshName("example_jobs"), FreshName("example_jobs")
	checkIdent(t, a)
	if a == b {
		t.Errorf("FreshName returned %q twice", a)
	}
	if !regexp.MustCompile(`^example_jobs_[0-9a-f]{8}$`).MatchString(a) {
		t.Errorf("FreshName(%q) = %q, want the prefix and 8 hex digits", "example_jobs", a)
	}
}

// TestUniqueNameIsUsableSQL creates and drops schemas named by UniqueName
// through AdminPool, proving the names need no quoting.
func TestUniqueNameIsUsableSQL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := AdminPool(t)
	if AdminPool(t) != pool {
		t.Fatal("AdminPool returned a different pool")
	}
	if got := pool.Config().MaxConns; got != poolMaxConns {
		t.Fatalf("MaxConns = %d, want %d", got, poolMaxConns)
	}
	for _, prefix := range []string{"schema", "9", strings.Repeat("x", 80)} {
		name := UniqueName(t, prefix)
		if _, err := pool.Exec(ctx, "create schema "+name); err != nil {
			t.Fatalf("create schema %s: %v", name, err)
		}
		var got string
		err := pool.QueryRow(ctx, "select nspname from pg_namespace where nspname = $1", name).Scan(&got)
		if err != nil || got != name {
			t.Fatalf("schema %s not found as-is (got %q, %v)", name, got, err)
		}
		if _, err := pool.Exec(ctx, "drop schema "+name); err != nil {
			t.Fatalf("drop schema %s: %v", name, err)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@h:5432/db?sslmode=disable": "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"postgres://u@h/db?password=secret":             "postgres://u@h/db?password=xxxxx",
		"host=h user=u password=secret dbname=d":        "host=h user=u password=xxxxx dbname=d",
		"host=h password='se cret' dbname=d":            "host=h password=xxxxx dbname=d",
		"postgres://postgres@127.0.0.1:5/postgres":      "postgres://postgres@127.0.0.1:5/postgres",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}
