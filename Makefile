.PHONY: test run bench generate check-generated

test:            ## every test, against real PostgreSQL
	./scripts/test.sh

run:             ## one worker; starts a local PostgreSQL when DATABASE_URL is unset
	./scripts/run-worker.sh

bench:           ## figures of issues "Core", "Execution engine" and "Benchmarks"
	./scripts/ensure-postgres.sh && go run ./cmd/bench

generate:
	sqlc generate

check-generated:
	sqlc diff
