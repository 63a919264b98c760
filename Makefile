# dtrain — the two commands of the README:
#   make run   installs missing Debian packages, builds, runs the main job
#   make test  installs, builds (release and ASan+UBSan), runs every test through ctest
JOBS ?= 2
DEB_PACKAGES := build-essential cmake pkg-config libopenblas-openmp-dev libopenmpi-dev \
	openmpi-bin libjansson-dev libyaml-dev zlib1g-dev libsqlite3-dev libdnnl-dev \
	dataset-fashion-mnist

.PHONY: all deps build build-asan run test bench install clean format

all: build

deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing \
	    || { echo "error: could not install:$$missing (run as root or with sudo)"; exit 1; }; \
	fi
	@# Python packages that tests use as real clients of our files (TensorBoard's event
	@# reader, the safetensors loader); never needed to build or run dtrain itself.
	@python3 -c "import tensorboard, safetensors, numpy" 2>/dev/null || \
	  python3 -m pip install -q --disable-pip-version-check tensorboard safetensors numpy \
	  || { echo "error: could not pip install tensorboard safetensors numpy"; exit 1; }

build: deps
	cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
	cmake --build build -j $(JOBS)

build-asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDT_SANITIZE=ON -DCMAKE_C_FLAGS_DEBUG="-O1 -g"
	cmake --build build-asan -j $(JOBS)

run: build
	./build/dtrain train examples/fashion_mnist/const.yaml examples/fashion_mnist

test: build build-asan
	cd build && ctest --output-on-failure -j 1
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j 1

bench: build
	./build/dtrain bench train --model mlp --json
	./build/dtrain bench train --model cnn --json
	./build/dtrain bench train --model gpt --json

# bin/dtrain, lib/libdtrain.so*, include/dtrain/, lib/pkgconfig/dtrain.pc, lib/cmake/dtrain/
PREFIX ?= /usr/local
install: build
	cmake --install build --prefix $(PREFIX)

format:
	clang-format -i include/dtrain/*.h src/*/*.c src/*/*.h src/*/*/*.c tests/*/*.c

clean:
	rm -rf build build-asan
