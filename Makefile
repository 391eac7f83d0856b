.PHONY: test test-citus citus-up citus-down run bench generate check-generated chaos chaos-outage chaos-failover chaos-short chaos-failover-short chaos-limits-short image screenshots mutants

test:            ## every test, against real PostgreSQL
	./scripts/test.sh

mutants:         ## break each README guarantee on purpose, one at a time, and check a test fails for it: prints mutation -> test; see docs/mutants.md
	./scripts/mutants.sh $(MUTANTS_ARGS)

test-citus:      ## every test on a one-machine Citus cluster (coordinator + 2 workers) it starts and stops, each schema distributed; Citus is built from ../shared/citus
	./scripts/test-citus.sh

citus-up:        ## start the one-machine Citus cluster and print its coordinator's URL (scripts/citus-cluster.sh)
	./scripts/citus-cluster.sh start

citus-down:      ## stop it and remove its data
	./scripts/citus-cluster.sh stop

run:             ## one worker; starts a local PostgreSQL when DATABASE_URL is unset
	./scripts/run-worker.sh

bench:           ## pgsched beside River (and, with BENCH_ANCHORS=1, graphile-worker and pgbench); see ./scripts/bench.sh --help
	./scripts/bench.sh

generate:        ## sqlc's Go, and the time zone names every worker can load (internal/cronspec/mkzones.go)
	sqlc generate
	go generate ./internal/cronspec

check-generated:
	sqlc diff

chaos:           ## kills, freezes, a PostgreSQL restart and webhook 500s against 3 workers, then checks nothing was lost, reordered or overlapped; see docs/chaos.md
	cd tools && go run ./cmd/chaos

chaos-outage:    ## the same with PostgreSQL down for 30s instead of the restart
	cd tools && go run ./cmd/chaos -mode outage

chaos-failover:  ## the same with a synchronous standby promoted when the primary is killed, instead of the restart
	cd tools && go run ./cmd/chaos -mode failover

chaos-short:     ## the CI preset of make chaos: about two minutes
	cd tools && go run ./cmd/chaos -short

chaos-failover-short: ## the CI preset of make chaos-failover: about two minutes
	cd tools && go run ./cmd/chaos -short -mode failover

chaos-limits-short: ## make chaos-short with the tasks' kind limited to 2 running at once: no delivery over it
	cd tools && go run ./cmd/chaos -short -limit 2

image:           ## the worker's container image, built without Docker: dist/pgsched-worker.oci.tar (an OCI archive); see deploy/README.md
	cd tools && go run ./cmd/image -out ../dist/pgsched-worker.oci.tar

screenshots:     ## the console's pages at 1280x800 and 390x844, from its browser tests, into docs/screenshots
	mkdir -p docs/screenshots && PGSCHED_SCREENSHOTS=$(CURDIR)/docs/screenshots go test -count=1 -run 'TestConsole' ./pgschedui
