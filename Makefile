.PHONY: test run bench generate check-generated

test:            ## every test, against real PostgreSQL
	./scripts/test.sh

run:             ## one worker; starts a local PostgreSQL when DATABASE_URL is unset
	./scripts/run-worker.sh

bench:           ## pgsched beside River (and, with BENCH_ANCHORS=1, graphile-worker and pgbench); see ./scripts/bench.sh --help
	./scripts/bench.sh

generate:
	sqlc generate

check-generated:
	sqlc diff
