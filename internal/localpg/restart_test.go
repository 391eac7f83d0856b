package localpg

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestRestartHaltResume(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := start(t, Options{DataDir: filepath.Join(tempDir(t), "data"), Durable: true})
	url := srv.URL()

	exec := func(sql string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	count := func() int {
		t.Helper()
		var n int
		if err := connect(t, url).QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n); err != nil {
			t.Fatalf("count: %v", err)
		}
		return n
	}
	if err := exec("CREATE TABLE kept (v int); INSERT INTO kept VALUES (1)"); err != nil {
		t.Fatal(err)
	}

	held := connect(t, url)
	if err := srv.Restart(ctx, Immediate); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if err := held.Ping(ctx); err == nil {
		t.Fatal("a session from before the immediate restart still answers")
	}
	if srv.URL() != url {
		t.Fatalf("URL changed across Restart: %s, then %s", url, srv.URL())
	}
	if n := count(); n != 1 {
		t.Fatalf("rows after Restart = %d, want 1", n)
	}

	if err := srv.Halt(ctx, Immediate); err != nil {
		t.Fatalf("Halt: %v", err)
	}
	if err := exec("SELECT 1"); err == nil {
		t.Fatal("connected to a halted server")
	}
	if err := srv.Resume(ctx); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if n := count(); n != 1 {
		t.Fatalf("rows after Halt and Resume = %d, want 1", n)
	}

	if err := srv.Halt(ctx, "sudden"); err == nil {
		t.Fatal("Halt accepted an unknown mode")
	}
	if err := srv.Halt(ctx, Fast); err != nil {
		t.Fatalf("Halt fast: %v", err)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("Stop after Halt: %v", err)
	}
	if err := srv.Resume(ctx); err == nil {
		t.Fatal("Resume after Stop succeeded")
	}
}
