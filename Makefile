# Targets shared by people and CI (.ci/run).
.PHONY: test race fuzz bench lint demo ci nemesis

test:            ## every test (the README's command)
	scripts/test

fuzz:            ## every fuzz target for 30s
	scripts/fuzz 30s

nemesis:         ## the demo under faults, every driver, a history checker (docs/RELIABILITY.md)
	scripts/nemesis

bench:           ## Go benchmarks with allocations
	go test -run '^$$' -bench . -benchmem ./...

lint:
	gofmt -l . && go vet ./...

demo:            ## the demo app on the file driver, in ./.oke
	go run ./examples/payments

ci:
	bash .ci/run
