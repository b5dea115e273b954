# Targets shared by people and CI (.ci/run).
.PHONY: test race fuzz bench lint demo ci

test:            ## every test (the README's command)
	scripts/test

fuzz:            ## every fuzz target for 30s
	scripts/fuzz 30s

bench:           ## Go benchmarks with allocations
	go test -run '^$$' -bench . -benchmem ./...

lint:
	gofmt -l . && go vet ./...

demo:            ## the demo app on the file driver, in ./.oke
	go run ./examples/payments

ci:
	bash .ci/run
