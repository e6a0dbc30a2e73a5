# kbisect developer tasks. The README's commands never need just.

# Fast tests, as CI runs them.
test:
    go test -timeout 30m ./...

# Tests with the race detector.
race:
    go test -race ./...

# Vet and formatting.
lint:
    go vet ./...
    test -z "$(gofmt -l $(git ls-files '*.go'))"

# Bisection engine benchmarks on a generated kernel-scale history
# (1,000,000 commits; made once into $KBISECT_BENCH_REPO, default /tmp/kbisect-bench).
bench:
    KBISECT_BENCH=1 go test ./bisect ./worktree -run '^$' -bench . -benchmem -benchtime 5x -timeout 60m

# Wall time to an answer in simulated time: the posterior search with its
# confirmation against its physical floor, on 2 and 4 machines at once,
# the rule, and ktest.pl as shipped and at equal confidence; one table per preset of costs (the
# lab's, a 64-core build server's), noise and size (500 and 5,000
# commits), mean of KBISECT_SPEED_RUNS (default 200) seeded bisections.
# KBISECT_SPEED_COSTS="cold=25m,incremental=6m,reboot=4m,kexec=40s,settle=30s,sample=60s"
# prices one preset of its own; KBISECT_SPEED_SIZES=500,5000.
bench-speed:
    go test ./simulate -run '^$' -bench BisectWallTime -benchtime 1x -v -timeout 60m | grep -v '^=== RUN'

# The whole `kbisect run --exec` bisection beside `git bisect run` on a
# real u-boot clone ($KBISECT_BENCH_UBOOT, default /var/tmp/kbisect-uboot):
# 5 alternating rounds after a warm-up, the medians and their ratio
# (docs/exec.md, "How fast").
bench-exec:
    KBISECT_BENCH_UBOOT=${KBISECT_BENCH_UBOOT:-/var/tmp/kbisect-uboot} go test ./cmd/kbisect -run '^TestExecBenchBesideGitBisectRun$' -v -count 1 -timeout 60m

# Fuzz every parser and the job loader for a minute each.
fuzz:
    for t in $(grep -ho '^func Fuzz[A-Za-z]*' configs/*_test.go noise/*_test.go | sed 's/^func //'); do p=./noise; grep -q "^func $t" configs/*_test.go && p=./configs; go test $p -run '^$' -fuzz "^$t\$" -fuzztime 60s || exit 1; done

# The fault-matrix soak: seeded simulated bisections (KBISECT_SOAK_RUNS,
# default 200), each with one fault of the lab (a hung host, a dropped
# connection, a changed host key, a full disk, kernels that panic or boot
# wrong, noise…), each kbisect SIGKILLed once mid-run and resumed; the
# table goes to $KBISECT_SOAK_OUT (default /tmp/kbisect-soak.md). As root
# for the disk faults (a small tmpfs each). Hours on 2 cores.
soak:
    KBISECT_SOAK=1 KBISECT_SOAK_OUT=${KBISECT_SOAK_OUT:-/tmp/kbisect-soak.md} go test ./cmd/kbisect -run '^TestSoak$' -v -timeout 24h

# The verdict rule against fixed 10 samples on simulated kernels.
simulate:
    go test ./noise -run TestSequentialRule -v
    go test ./noise -run '^$' -bench SequentialVerdict -benchtime 3x

# A real 6.12 PREEMPT_RT kernel build: cold, one-file rebuild, cache hit
# (needs apt-get install linux-source-6.12 flex bison libelf-dev bc ccache).
e2e-build:
    KBISECT_E2E=1 go test ./kbuild -run TestRealKernelBuildsAndRebuildsOneFile -v -timeout 90m

# The HTML reports rendered in headless Chromium, screenshots checked
# (needs apt-get install chromium); screenshots kept in /tmp/kbisect-html.
e2e-html:
    mkdir -p /tmp/kbisect-html
    KBISECT_E2E=1 KBISECT_E2E_OUT=/tmp/kbisect-html go test ./cmd/kbisect -run TestHTMLReportsRenderTheirPlotsInChromium -v

# What the heavy tests need, made once: Debian packages, Debian's
# linux-source-6.12 as a git repository, the QEMU lab image (/var/tmp).
e2e-prepare:
    @echo "e2e-prepare installs: qemu-system-x86 (the QEMU lab), debootstrap e2fsprogs cpio (its root image), linux-source-6.12 flex bison libelf-dev libssl-dev bc ccache (real kernel builds), chromium (the HTML report test)"
    @echo "and makes: /var/tmp/kbisect-e2e/linux-source-6.12 (Debian's kernel source as a git repository), /var/tmp/kbisect-lab/rootfs.img (the guest's image)"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends qemu-system-x86 debootstrap e2fsprogs linux-source-6.12 flex bison libelf-dev libssl-dev bc ccache cpio chromium
    test -d /var/tmp/kbisect-e2e/linux-source-6.12/.git || (mkdir -p /var/tmp/kbisect-e2e && tar -xf /usr/src/linux-source-6.12.tar.xz -C /var/tmp/kbisect-e2e && cd /var/tmp/kbisect-e2e/linux-source-6.12 && git init -q && git add -A -f && git -c user.name=kbisect -c user.email=e2e@kbisect.invalid commit -q -m "linux-source-6.12 $(make -s kernelversion)")
    test -f /var/tmp/kbisect-lab/rootfs.img || go run ./cmd/kbisect lab image --dir /var/tmp/kbisect-lab

# A real 6.12 PREEMPT_RT kernel bisected in a local QEMU guest, then the
# culprit reverted in an A/B, then every report; reports and logs stay in
# /tmp/kbisect-e2e-qemu (about 17 minutes with the kernels in the cache,
# plus one cold build of about 12 minutes the first time).
e2e-qemu: e2e-prepare
    mkdir -p /tmp/kbisect-e2e-qemu
    KBISECT_E2E=1 KBISECT_E2E_OUT=/tmp/kbisect-e2e-qemu go test ./cmd/kbisect -run TestQEMULabBisectsARealKernel -v -timeout 90m

# The same, every kernel built on a build server over SSH (build.host): a
# second sshd on 127.0.0.1 with its own host key, its own clone and cache;
# a cold build there first (about 12 min on 2 cores), then incremental ones:
# about 31 minutes in all (docs/qemu-e2e).
e2e-qemu-buildhost: e2e-prepare
    mkdir -p /tmp/kbisect-e2e-qemu-buildhost
    KBISECT_E2E=1 KBISECT_E2E_BUILD_HOST=1 KBISECT_E2E_OUT=/tmp/kbisect-e2e-qemu-buildhost go test ./cmd/kbisect -run TestQEMULabBisectsARealKernel -v -timeout 6h

# kbisect nightly on real kernels in a local QEMU guest: four nights of
# release tags on the e2e series (baseline, regression bisected, still
# present, fixed); reports and logs stay in /tmp/kbisect-e2e-nightly.
e2e-nightly: e2e-prepare
    mkdir -p /tmp/kbisect-e2e-nightly
    KBISECT_E2E=1 KBISECT_E2E_OUT=/tmp/kbisect-e2e-nightly go test ./cmd/kbisect -run TestQEMUNightlyOnARealSeries -v -timeout 90m

# Heavy end-to-end tests (real kernel builds, QEMU boots, headless Chromium),
# one package at a time: a kernel build beside the QEMU guest would be the
# noise it measures.
e2e: e2e-prepare
    KBISECT_E2E=1 go test -p 1 ./... -timeout 180m

# Build the binary.
build:
    go build -o kbisect ./cmd/kbisect
