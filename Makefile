# superpeer: two commands do all the set-up on a fresh machine.
#   make run    start a local testnet of 32 peers, show its clusters, and serve a page of the
#               overlay on http://$(HTTP)/ until Ctrl-C
#   make test   run the whole test suite (what CI runs): gofmt, vet, staticcheck, every test,
#               the race detector on the packages with goroutines, then every fuzz target for 5 s
#   make fuzz   run every fuzz target for FUZZTIME each (default 10m: about two hours in all)
#   make deps   install what the tests need besides Go: Debian's chromium (make test does it)
#   make bench  run every benchmark suite and regenerate BENCHMARKS.md's marked blocks, keeping the hand-written notes between them (about an hour: TestGeoLiveVirtual alone, 100 live nodes in virtual time, took 385 s of wall time in its last run, under load)
#   make screenshots  regenerate docs/screenshots/ (the overlay page, by its browser test)

GO  ?= go
BIN := bin/peer

.PHONY: all build run screenshots test fuzz deps bench check-go fmt-check vet staticcheck clean

all: build

check-go:
	@$(GO) version >/dev/null 2>&1 || { echo "Go 1.26 or newer is needed (https://go.dev/dl/)"; exit 1; }

build: check-go
	$(GO) build -o $(BIN) ./cmd/peer

## run: the main job on its default, a local testnet of 32 peers and 4 superpeers;
## after its table it keeps the testnet running and its page on http://$(HTTP)/
## until Ctrl-C (make run HTTP=127.0.0.1:8081 where 8080 is taken)
HTTP ?= 127.0.0.1:8080
run: build
	./$(BIN) testnet -n 32 --superpeers 4 --http $(HTTP)

## screenshots: the overlay page of a 32-node testnet, stable and while a crashed
## superpeer's cluster elects, as PNGs in docs/screenshots (cmd/peer
## TestOverlayPage in headless Chromium)
screenshots: check-go deps
	$(GO) test ./cmd/peer -run '^TestOverlayPage$$' -count=1 -v -args -screenshots $(CURDIR)/docs/screenshots

## grafana-shot: docs/grafana/superpeer.json drawn by Grafana's panel library
## (@grafana/ui, not a Grafana server) from a Prometheus scraping GRAFANA_NODES
## `peer run --http` nodes on loopback for GRAFANA_DURATION seconds, one
## superpeer stopped midway, as docs/screenshots/grafana-dashboard.png
## (docs/grafana/render/shot.sh). It installs Debian's prometheus and
## fonts-inter and the npm packages (into bin/grafana-shot) when missing; needs
## Node.js 20 or newer. Not part of make test
GRAFANA_NODES ?= 8
GRAFANA_DURATION ?= 420
.PHONY: grafana-shot
grafana-shot: build deps
	NODES=$(GRAFANA_NODES) DURATION=$(GRAFANA_DURATION) KILL_AT=$$(($(GRAFANA_DURATION) * 4 / 7)) PEER=$(CURDIR)/$(BIN) bash docs/grafana/render/shot.sh

## deps: Debian's chromium, for the headless browser test of the status page
## (cmd/peer TestStatusPageInBrowser); nothing to do when it is installed
deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium package (the status page's browser test needs it)"; \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -q && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; }

## test: formatting, vet, staticcheck, every test, then the race detector
## (short mode), then every fuzz target for TEST_FUZZTIME each (.ci/fuzz). On
## 2 cores that adds about 4.5 minutes: 5 s for each of the 16 targets, and
## about 3.5 minutes to build the fuzz-instrumented test binaries (go test
## -fuzz instruments every package it links, libp2p included; no flag
## narrows it)
##
## The race detector runs on the packages whose code starts goroutines (the
## shell, gossip, the live testnets, the CLI, the benchmarks and the hostile
## clients). The pure machines (classic, dhtselect, geometric, overlay/node)
## and their simulators (testnet/sim, testnet/nodesim) start none: under the
## detector they took about 4.5 minutes of test time (2.3 of wall time on 2
## cores) for nothing a plain run does not check
TEST_FUZZTIME ?= 5s
RACE_PKGS := ./bench ./cmd/... ./examples/... ./gossip/... ./overlay ./testnet ./testnet/attack
## -timeout 15m: testnet's live scenarios take 8.5 to 10 minutes on 2
## cores, at go test's default limit of 10 (one package over it in a
## session-13 run); the other packages take far less
test: check-go deps fmt-check vet staticcheck
	$(GO) test -count=1 -timeout 15m ./...
	$(GO) test -count=1 -race -short $(RACE_PKGS)
	GO=$(GO) bash .ci/fuzz $(TEST_FUZZTIME)

## fuzz: every fuzz target (found by .ci/fuzz with go test -list '^Fuzz'),
## one after the other, for FUZZTIME each: 10 minutes per target by default,
## as the issue asks before a fuzz target counts as clean
FUZZTIME ?= 10m
fuzz: check-go
	GO=$(GO) bash .ci/fuzz $(FUZZTIME)

## bench: every suite, simulator and live testnet; writes docs/bench/ (results.json,
## PNG plots) and BENCHMARKS.md's generated blocks (the text between them, written
## by hand, stays: bench.MergeMarkdown). First the side by side of simulator and live
## with the live side in virtual time (testing/synctest runs only in a test:
## go test writes its rows, peer bench adds them)
bench: build
	mkdir -p docs/bench
	$(GO) test ./bench -run '^TestSimLiveVirtual$$' -count=1 -timeout 60m -v -args -simlive.out $(CURDIR)/docs/bench/simlive-virtual.json
	$(GO) test ./bench -run '^TestGeoLiveVirtual$$' -count=1 -timeout 90m -v -args -geolive.out $(CURDIR)/docs/bench/geolive-virtual.json
	$(GO) test ./testnet/nodesim -run '^TestGeoLiarCheckVantage$$' -count=1 -timeout 30m -v -args -geoliar
	$(GO) test ./testnet/nodesim -run '^TestElectionSurvey$$' -count=1 -timeout 30m -v -args -electionsurvey
	./$(BIN) bench --suite all --out docs/bench --report BENCHMARKS.md --simlive docs/bench/simlive-virtual.json --geolive docs/bench/geolive-virtual.json

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

## staticcheck: honnef.co/go/tools at a fixed version (go run fetches it into
## the module cache on first use)
staticcheck: check-go
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

clean:
	rm -rf bin
