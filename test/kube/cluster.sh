#!/usr/bin/env bash
# A real single-node Kubernetes for nodesnap's end-to-end tests, built from
# upstream source through the Go module proxy and Debian's packages:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, a kubelet
# with webhook authentication and authorization (anonymous off), containerd
# and runc, bridge CNI, a stand-in CSI driver and the upstream
# csi-driver-host-path with node-driver-registrar (see UPSTREAM below),
# registered through the kubelet's plugin watcher, journald receiving the
# kubelet's and containerd's logs.
#
#   test/kube/cluster.sh build   # compile (cached) and package the images
#   test/kube/cluster.sh up      # start it; prints the kubeconfig path
#   test/kube/cluster.sh down    # stop what up started, by pid; undo mounts,
#                               # cgroups, links and sysctls; remove state
#
# Everything listens on loopback only; the kubelet cannot report a loopback
# node IP, so the apiserver reaches it by the node's host name, which must
# resolve to a loopback address (/etc/hosts), as `up` checks. Binaries are cached per Kubernetes version in
# $NODESNAP_E2E_CACHE (default /var/cache/nodesnap-e2e); the cluster's state
# lives in $NODESNAP_E2E_STATE (default /var/lib/nodesnap-e2e). The kubelet
# and containerd use their standard paths (/var/lib/kubelet, /run/containerd,
# /var/lib/containerd) because that is what nodesnap must find on a node;
# `up` refuses to start when any of them is already in use.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
K8S_VERSION="${K8S_VERSION:-v1.34.4}"
CACHE="${NODESNAP_E2E_CACHE:-/var/cache/nodesnap-e2e}"
STATE="${NODESNAP_E2E_STATE:-/var/lib/nodesnap-e2e}"
BIN="$CACHE/$K8S_VERSION/bin"
IMAGES="$CACHE/$K8S_VERSION/images"
PAUSE_REF="registry.k8s.io/pause:3.10"
CSI_REF="nodesnap.test/csi-hostpath:e2e"
CSI_NAME="hostpath.csi.k8s.io"
# The upstream CSI parts run beside the stand-in driver, each built from its
# repository at a release tag (the one place their versions are pinned: the
# tag and the commit it names). The proxy is asked first, by commit; where
# it does not serve a module, the source comes from a cached archive,
# $CACHE/src/NAME-TAG.tar.gz, made in a clone of the repository with
#   git archive --format=tar.gz --prefix=NAME-TAG/ -o NAME-TAG.tar.gz TAG
# (the archive names its commit, which must be the pinned one). Without
# either the cluster comes up without them and says so.
UPSTREAM=(
  "csi-driver-host-path github.com/kubernetes-csi/csi-driver-host-path v1.18.0 cc78ee78ae23908c9e0607df2fe09c7ecfa52597 ./cmd/hostpathplugin"
  "node-driver-registrar github.com/kubernetes-csi/node-driver-registrar v2.17.0 c5794c45f34ce9c62e47dfd5a2b073c3824f2c79 ./cmd/csi-node-driver-registrar"
)
UPSTREAM_CSI_NAME="hostpath.upstream.csi.k8s.io"
UPSTREAM_STATE_DIR=/var/lib/csi-hostpath-upstream
UPSTREAM_CSI_REF="nodesnap.test/hostpathplugin:e2e"
REGISTRAR_REF="nodesnap.test/csi-node-driver-registrar:e2e"
NODE="$(hostname | tr '[:upper:]' '[:lower:]')"
CTR_SOCK=/run/containerd/containerd.sock
KUBELET_DIR=/var/lib/kubelet
export PATH="/usr/local/go/bin:/usr/local/sbin:/usr/sbin:/sbin:$PATH"

log() { printf '%s e2e-k8s: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Sysctls the kubelet sets at start (vm.overcommit_memory and friends) or the
# bridge plugin may: saved by up, restored by down.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)

cmd_build() {
  mkdir -p "$BIN" "$IMAGES"
  local want=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
  # Stamped as upstream's release builds are, so that the node reports
  # kubelet v1.34.x (and nodesnap's bundle says so), not v0.0.0-master.
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  local v=k8s.io/component-base/version
  local ldflags="-s -w -X $v.gitVersion=$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
  [ "$(cat "$BIN/.ldflags" 2>/dev/null)" = "$ldflags" ] || rm -f "${want[@]/#/$BIN/}"
  local missing=()
  for b in "${want[@]}"; do [ -x "$BIN/$b" ] || missing+=("k8s.io/kubernetes/cmd/$b"); done
  if [ ${#missing[@]} -gt 0 ]; then
    log "building ${missing[*]##*/} $K8S_VERSION from source (about 12 minutes cold on 2 cores)"
    (cd "$HERE/tools" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$BIN/" "${missing[@]}")
    echo "$ldflags" > "$BIN/.ldflags"
  fi
  # The CSI driver is ours: rebuild it whenever its source is newer.
  if [ ! -x "$BIN/csidriver" ] || [ -n "$(find "$HERE/tools/csidriver" -newer "$BIN/csidriver" -name '*.go')" ]; then
    log "building the CSI driver"
    (cd "$HERE/tools" && CGO_ENABLED=0 go build -trimpath -o "$BIN/csidriver" ./csidriver)
  fi
  if [ ! -x "$BIN/pause" ]; then
    # registry.k8s.io is out of reach: the pause image from the upstream
    # source in the same module, as upstream's build/pause does.
    local src
    src="$(cd "$HERE/tools" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c"
    log "building pause from $src"
    gcc -Os -static -Wall -Werror -DVERSION="3.10-nodesnap-e2e" -o "$BIN/pause" "$src"
    strip "$BIN/pause"
  fi
  if [ ! -x "$BIN/csiclient" ] || [ -n "$(find "$HERE/tools/csiclient" -newer "$BIN/csiclient" -name '*.go')" ]; then
    (cd "$HERE/tools" && CGO_ENABLED=0 go build -trimpath -o "$BIN/csiclient" ./csiclient)
  fi
  oci_archive "$PAUSE_REF" "$BIN/pause" /pause '["/pause"]' "$IMAGES/pause.oci.tar"
  oci_archive "$CSI_REF" "$BIN/csidriver" /csidriver '["/csidriver"]' "$IMAGES/csi.oci.tar"
  # The upstream driver mounts with mount(8) and checks its mounts with
  # findmnt, as in its own image: the host's, with their libraries.
  rm -f "$IMAGES/upstream.ok"
  if build_upstream "${UPSTREAM[0]}" && build_upstream "${UPSTREAM[1]}"; then
    oci_archive "$UPSTREAM_CSI_REF" "$(upstream_bin "${UPSTREAM[0]}")" /hostpathplugin '["/hostpathplugin"]' \
      "$IMAGES/hostpathplugin.oci.tar" mount umount findmnt
    oci_archive "$REGISTRAR_REF" "$(upstream_bin "${UPSTREAM[1]}")" /csi-node-driver-registrar '["/csi-node-driver-registrar"]' \
      "$IMAGES/registrar.oci.tar"
    : > "$IMAGES/upstream.ok"
  fi
}

upstream_bin() { # "NAME MODULE TAG COMMIT PKG": where build_upstream puts its binary
  local name mod tag commit pkg
  read -r name mod tag commit pkg <<<"$1"
  echo "$CACHE/upstream/$name-$tag/${pkg##*/}"
}

# build_upstream "NAME MODULE TAG COMMIT PKG" (an entry of UPSTREAM): the
# command PKG of that release, cached per tag; returns 1, saying why, when
# neither the module proxy nor a cached archive has its source.
build_upstream() {
  local name mod tag commit pkg
  read -r name mod tag commit pkg <<<"$1"
  local out; out="$(upstream_bin "$1")"
  [ -x "$out" ] && return 0
  local d dir="" flags archive="$CACHE/src/$name-$tag.tar.gz"
  d="$(mktemp -d)"
  # The proxy by commit: a v2+ tag of a module without a /v2 path (the
  # registrar's) is no version the proxy can name, its commit is.
  dir="$(cd "$d" && go mod download -json "$mod@$commit" 2>/dev/null | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')" || dir=""
  if [ -n "$dir" ] && [ -d "$dir" ]; then
    log "building $name $tag from the module proxy"
    cp -r "$dir" "$d/$name-$tag" && chmod -R u+w "$d/$name-$tag"
    flags=-mod=mod # a module's zip has no vendor/: its requirements come from the proxy too
  elif [ -f "$archive" ]; then
    local id
    # (git stops reading after the header: gzip's broken pipe is no error)
    id="$( (gzip -dc "$archive" 2>/dev/null || true) | git get-tar-commit-id)" || id=""
    [ "$id" = "$commit" ] || { rm -rf "$d"; die "$archive is of commit ${id:-unknown}, not of $tag ($commit)"; }
    log "building $name $tag from $archive (the module proxy does not serve it)"
    tar -xzf "$archive" -C "$d"
    flags=-mod=vendor # the repository carries its requirements
  else
    log "no source for $name $tag: the module proxy does not serve $mod@$commit and $archive is missing;" \
      "the cluster comes up without the upstream CSI driver"
    rm -rf "$d"
    return 1
  fi
  mkdir -p "$(dirname "$out")"
  if ! (cd "$d/$name-$tag" && CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} $flags" \
    go build -trimpath -ldflags "-s -w -X main.version=$tag" -o "$out.tmp" "$pkg"); then
    rm -rf "$d" "$out.tmp"
    die "building $name $tag failed"
  fi
  mv "$out.tmp" "$out"
  rm -rf "$d"
}

# oci_archive REF BINARY PATH-IN-IMAGE ENTRYPOINT-JSON OUT [PROGRAM...]: a
# one-layer OCI image archive for ctr import, deterministic (fixed mtimes,
# sorted); each PROGRAM of the host goes in /bin with its shared libraries.
oci_archive() {
  local ref="$1" bin="$2" dest="$3" entry="$4" out="$5"
  shift 5
  [ "$out" -nt "$bin" ] && return 0
  local d; d="$(mktemp -d)"
  mkdir -p "$d/root$(dirname "$dest")" "$d/root/tmp" "$d/root/bin" "$d/blobs/sha256"
  chmod 1777 "$d/root/tmp"
  cp "$bin" "$d/root$dest"
  local prog p lib
  for prog in "$@"; do
    p="$(command -v "$prog")" || die "$prog is not installed (the image of $ref needs it)"
    cp -L "$p" "$d/root/bin/$prog"
    for lib in $(ldd "$p" 2>/dev/null | grep -o '/[^ ]*'); do
      mkdir -p "$d/root$(dirname "$lib")"
      cp -L "$lib" "$d/root$lib"
    done
  done
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$d/root" -cf "$d/layer.tar" .
  local lsha lsize arch
  lsha="$(sha256sum "$d/layer.tar" | cut -d' ' -f1)"; lsize="$(stat -c %s "$d/layer.tar")"
  mv "$d/layer.tar" "$d/blobs/sha256/$lsha"
  arch="$(go env GOARCH)"
  printf '{"architecture":"%s","os":"linux","config":{"Entrypoint":%s,"Env":["PATH=/bin:/"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$arch" "$entry" "$lsha" > "$d/config.json"
  local csha csize
  csha="$(sha256sum "$d/config.json" | cut -d' ' -f1)"; csize="$(stat -c %s "$d/config.json")"
  mv "$d/config.json" "$d/blobs/sha256/$csha"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$csha" "$csize" "$lsha" "$lsize" > "$d/manifest.json"
  local msha msize
  msha="$(sha256sum "$d/manifest.json" | cut -d' ' -f1)"; msize="$(stat -c %s "$d/manifest.json")"
  mv "$d/manifest.json" "$d/blobs/sha256/$msha"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$msha" "$msize" "$ref" "${ref##*:}" > "$d/index.json"
  printf '{"imageLayoutVersion":"1.0.0"}' > "$d/oci-layout"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$d" -cf "$out.tmp" oci-layout index.json blobs
  mv "$out.tmp" "$out"
  rm -rf "$d"
}

# start NAME [--journal] CMD...: run CMD in its own session, its pid in
# $STATE/pids/NAME; with --journal its output goes to journald under the
# syslog identifier NAME (as a systemd unit's would), else to $STATE/log.
start() {
  local name="$1"; shift
  local journal=false
  if [ "$1" = --journal ]; then journal=true; shift; fi
  if $journal; then
    setsid systemd-cat -t "$name" -- "$@" </dev/null &
  else
    setsid "$@" </dev/null >"$STATE/log/$name.log" 2>&1 &
  fi
  echo $! > "$STATE/pids/$name"
}

wait_for() { # SECONDS WHAT CMD...: WHAT names a process of $STATE/pids or not
  local n="$1" what="$2"; shift 2
  for ((i = 0; i < n * 2; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    if [ -f "$STATE/pids/$what" ] && ! kill -0 "$(cat "$STATE/pids/$what")" 2>/dev/null; then
      die "$what exited while starting (logs: $STATE/log/$what.log or journalctl -t $what)"
    fi
    sleep 0.5
  done
  die "$what did not come up within ${n}s (logs: $STATE/log, journalctl -t kubelet -t containerd)"
}

pki() {
  local p="$STATE/pki"; mkdir -p "$p"; chmod 700 "$p"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=nodesnap-e2e-ca" \
    -keyout "$p/ca.key" -out "$p/ca.crt" 2>/dev/null
  # cert NAME SUBJECT [SAN]
  cert() {
    openssl req -new -newkey rsa:2048 -nodes -subj "$2" -keyout "$p/$1.key" -out "$p/$1.csr" 2>/dev/null
    local ext="$p/$1.ext"
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n' > "$ext"
    [ -n "${3:-}" ] && printf 'subjectAltName=%s\n' "$3" >> "$ext"
    openssl x509 -req -in "$p/$1.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 2 \
      -extfile "$ext" -out "$p/$1.crt" 2>/dev/null
    rm -f "$p/$1.csr" "$ext"
  }
  cert apiserver "/CN=kube-apiserver" "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
  cert admin "/O=system:masters/CN=nodesnap-e2e-admin"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  cert kubelet-client "/O=system:nodes/CN=system:node:$NODE"
  cert kubelet-serving "/CN=$NODE" "IP:127.0.0.1,DNS:$NODE,DNS:localhost"
  cert controller-manager "/CN=system:kube-controller-manager"
  cert scheduler "/CN=system:kube-scheduler"
  openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
  openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
  for who in admin kubelet-client controller-manager scheduler; do
    cat > "$STATE/$who.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: "https://127.0.0.1:6443", certificate-authority: "$p/ca.crt"}
users:
- name: $who
  user: {client-certificate: "$p/$who.crt", client-key: "$p/$who.key"}
contexts:
- name: e2e
  context: {cluster: e2e, user: $who}
current-context: e2e
EOF
  done
}

cmd_up() {
  [ "$(id -u)" = 0 ] || die "must run as root"
  [ -e "$STATE/pids" ] && die "a cluster is already up ($STATE); run: $0 down"
  for p in "$CTR_SOCK" "$KUBELET_DIR"; do
    [ -e "$p" ] && die "$p already exists: another runtime or kubelet is here; refusing to start"
  done
  for port in 2379 2380 6443 10250 10248 10257 10259; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then die "port $port on 127.0.0.1 is in use"; fi
  done
  # The apiserver reaches the kubelet by the node's name, which must resolve
  # to loopback; where the host name does not, the node is called localhost.
  case "$(getent hosts "$NODE" | awk '{print $1; exit}')" in
    127.*|::1) ;;
    *) log "the host name $NODE does not resolve to a loopback address: naming the node localhost"; NODE=localhost ;;
  esac
  for t in etcd containerd runc ctr openssl systemd-cat gcc curl; do
    command -v "$t" >/dev/null || die "$t is not installed (see .ci/run for the Debian packages)"
  done
  cmd_build
  mkdir -p "$STATE"/{pids,log,cni,etcd}
  echo "$NODE" > "$STATE/node"
  : > "$STATE/created"
  for s in "${SYSCTLS[@]}"; do echo "$s=$(sysctl -n "$s")" >> "$STATE/sysctls"; done
  for d in /var/log/pods /var/log/containers /var/lib/containerd /var/lib/cni /run/containerd /run/netns "$KUBELET_DIR" /var/lib/csi-hostpath-data "$UPSTREAM_STATE_DIR"; do
    [ -e "$d" ] || echo "$d" >> "$STATE/created"
  done

  # journald: the node's logs must be where nodesnap looks for them.
  # (A journald in another mount namespace, such as a test's, does not count:
  # what matters is this namespace's /run/systemd/journal/stdout.)
  if ! [ -S /run/systemd/journal/stdout ] || ! systemd-cat true 2>/dev/null; then
    local mid; mid="$(cat /etc/machine-id)"
    for d in "/run/log/journal/$mid" "/var/log/journal/$mid"; do [ -e "$d" ] || echo "$d" >> "$STATE/created"; done
    local jd
    for jd in /lib/systemd/systemd-journald /usr/lib/systemd/systemd-journald; do [ -x "$jd" ] && break; done
    start journald "$jd"
    wait_for 15 journald test -S /run/systemd/journal/stdout
  fi

  pki
  log "etcd"
  start etcd etcd --name e2e --data-dir "$STATE/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster e2e=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381 \
    --quota-backend-bytes 1073741824

  log "containerd"
  cat > "$STATE/cni/10-bridge.conflist" <<EOF
{"cniVersion":"1.0.0","name":"e2e","plugins":[
 {"type":"bridge","bridge":"nodesnape2e0","isGateway":false,"ipMasq":false,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.0.0/24"}]]}},
 {"type":"loopback"}]}
EOF
  cat > "$STATE/containerd.toml" <<EOF
version = 2
[grpc]
  address = "$CTR_SOCK"
[debug]
  address = "/run/containerd/debug.sock"
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "$PAUSE_REF"
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$STATE/cni"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
EOF
  start containerd --journal containerd --config "$STATE/containerd.toml"
  wait_for 30 containerd ctr -a "$CTR_SOCK" version
  local imgs=(pause csi)
  [ -f "$IMAGES/upstream.ok" ] && imgs+=(hostpathplugin registrar)
  for img in "${imgs[@]}"; do
    ctr -a "$CTR_SOCK" -n k8s.io images import "$IMAGES/$img.oci.tar" >/dev/null
  done
  if [ -n "${NODESNAP_E2E_IMAGE_ARCHIVE:-}" ]; then
    log "importing $NODESNAP_E2E_IMAGE_ARCHIVE"
    ctr -a "$CTR_SOCK" -n k8s.io images import "$NODESNAP_E2E_IMAGE_ARCHIVE" >/dev/null
  fi

  wait_for 30 etcd curl -sf http://127.0.0.1:2379/health
  # The Service range has no proxy here: a pod that dials the API server's
  # Service address (10.0.0.1, from KUBERNETES_SERVICE_HOST) must fail on
  # this machine at once, never send a packet towards a private address.
  ip route replace unreachable 10.0.0.0/24
  log "kube-apiserver"
  local p="$STATE/pki"
  start kube-apiserver "$BIN/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port 6443 --endpoint-reconciler-type none \
    --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" --client-ca-file "$p/ca.crt" \
    --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$p/sa.pub" \
    --service-account-signing-key-file "$p/sa.key" --service-cluster-ip-range 10.0.0.0/24 \
    --authorization-mode Node,RBAC --allow-privileged=true \
    --kubelet-client-certificate "$p/apiserver-kubelet-client.crt" --kubelet-client-key "$p/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$p/ca.crt" --kubelet-preferred-address-types Hostname
  local k=("$BIN/kubectl" --kubeconfig "$STATE/admin.kubeconfig")
  wait_for 90 kube-apiserver "${k[@]}" get --raw /readyz

  log "kube-controller-manager, kube-scheduler"
  start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$STATE/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$STATE/controller-manager.kubeconfig" --authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --service-account-private-key-file "$p/sa.key" --root-ca-file "$p/ca.crt" \
    --use-service-account-credentials --controllers '*,-nodeipam,-nodelifecycle,-cloud-node-lifecycle,-service-lb-controller,-route'
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$STATE/scheduler.kubeconfig" \
    --authentication-kubeconfig "$STATE/scheduler.kubeconfig" --authorization-kubeconfig "$STATE/scheduler.kubeconfig" \
    --bind-address 127.0.0.1

  log "kubelet"
  cat > "$STATE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$p/ca.crt"}
authorization: {mode: Webhook}
tlsCertFile: "$p/kubelet-serving.crt"
tlsPrivateKeyFile: "$p/kubelet-serving.key"
enableDebuggingHandlers: true
containerRuntimeEndpoint: "unix://$CTR_SOCK"
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
makeIPTablesUtilChains: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
resolvConf: /etc/resolv.conf
clusterDomain: cluster.local
EOF
  start kubelet --journal "$BIN/kubelet" --config "$STATE/kubelet.yaml" --kubeconfig "$STATE/kubelet-client.kubeconfig" \
    --hostname-override "$NODE" --v 2
  wait_for 90 "node $NODE" "${k[@]}" get node "$NODE"
  "${k[@]}" wait --for=condition=Ready "node/$NODE" --timeout=120s >/dev/null || die "node $NODE did not become Ready"
  wait_for 60 "the default service account" "${k[@]}" -n default get serviceaccount default

  log "CSI driver, workloads"
  "${k[@]}" apply -f "$HERE/../../deploy/kubernetes/rbac.yaml" >/dev/null
  sed -e "s|CSI_IMAGE|$CSI_REF|g" -e "s|PAUSE_IMAGE|$PAUSE_REF|g" -e "s|CSI_NAME|$CSI_NAME|g" -e "s|NODE_NAME|$NODE|g" \
    "$HERE/manifests/cluster.yaml" | "${k[@]}" apply -f - >/dev/null
  "${k[@]}" -n e2e wait --for=condition=Ready pod/csi-hostpath-node pod/volume-user --timeout=120s >/dev/null \
    || { "${k[@]}" get pods -A -o wide >&2; "${k[@]}" -n e2e describe pods >&2; die "e2e pods did not become Ready"; }
  [ -f "$IMAGES/upstream.ok" ] && up_upstream
  echo "$STATE/admin.kubeconfig"
  log "up: KUBECONFIG=$STATE/admin.kubeconfig $BIN/kubectl get pods -A"
}

# up_upstream: the upstream hostpath driver's DaemonSet, a volume created
# through its controller service, and a pod using it; $STATE/upstream-csi
# names the driver once all of it runs (the e2e tests read it).
up_upstream() {
  log "upstream csi-driver-host-path and node-driver-registrar"
  local k=("$BIN/kubectl" --kubeconfig "$STATE/admin.kubeconfig")
  local subst=(-e "s|UPSTREAM_CSI_NAME|$UPSTREAM_CSI_NAME|g" -e "s|UPSTREAM_CSI_IMAGE|$UPSTREAM_CSI_REF|g"
    -e "s|REGISTRAR_IMAGE|$REGISTRAR_REF|g" -e "s|UPSTREAM_STATE_DIR|$UPSTREAM_STATE_DIR|g"
    -e "s|PAUSE_IMAGE|$PAUSE_REF|g" -e "s|NODE_NAME|$NODE|g")
  sed "${subst[@]}" "$HERE/manifests/upstream.yaml" | "${k[@]}" apply -f - >/dev/null
  "${k[@]}" -n e2e rollout status daemonset/node-storage-plugin --timeout=120s >/dev/null \
    || { "${k[@]}" -n e2e describe pods -l app=node-storage-plugin >&2; die "the upstream CSI driver's pod did not become ready"; }
  # Registered once the kubelet lists it in the node's CSINode.
  wait_for 60 "the upstream driver's registration" \
    sh -c "${k[*]} get csinode $NODE -o jsonpath='{.spec.drivers[*].name}' | grep -qwF $UPSTREAM_CSI_NAME"
  local id
  id="$("$BIN/csiclient" -endpoint "$KUBELET_DIR/plugins/$UPSTREAM_CSI_NAME/csi.sock" -name e2e-upstream-vol-1)" \
    || die "creating a volume through the upstream driver failed"
  sed "${subst[@]}" -e "s|VOLUME_ID|$id|g" "$HERE/manifests/upstream-volume.yaml" | "${k[@]}" apply -f - >/dev/null
  "${k[@]}" -n e2e wait --for=condition=Ready pod/upstream-volume-user --timeout=120s >/dev/null \
    || { "${k[@]}" -n e2e describe pod upstream-volume-user >&2; die "the pod using the upstream driver's volume did not become Ready"; }
  echo "$UPSTREAM_CSI_NAME" > "$STATE/upstream-csi"
}

stop_pid() { # NAME: SIGTERM, then SIGKILL after 10 s; by pid only
  local f="$STATE/pids/$1" pid
  [ -f "$f" ] || return 0
  pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 40; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

unmount_under() { # unmount every mount at or under $1, deepest first
  local root="$1"
  awk -v r="$root" '{ p=$5; gsub(/\\040/," ",p); if (p==r || index(p, r"/")==1) print p }' /proc/self/mountinfo \
    | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
}

cmd_down() {
  [ -d "$STATE" ] || { log "nothing to take down ($STATE does not exist)"; return 0; }
  local k=("$BIN/kubectl" --kubeconfig "$STATE/admin.kubeconfig" --request-timeout 10s)
  if [ -f "$STATE/pids/kube-apiserver" ] && [ -f "$STATE/pids/kubelet" ]; then
    # Let the kubelet tear pods down (volumes unpublished, sandboxes gone).
    # Pods using CSI volumes first, while the driver can still unpublish.
    "${k[@]}" -n e2e delete pod volume-user upstream-volume-user --ignore-not-found --grace-period=1 --wait=true --timeout=30s >/dev/null 2>&1 || true
    "${k[@]}" -n e2e delete daemonset node-storage-plugin --ignore-not-found --cascade=foreground --wait=true --timeout=30s >/dev/null 2>&1 || true
    "${k[@]}" delete namespace e2e nodesnap --wait=false >/dev/null 2>&1 || true
    "${k[@]}" delete pods --all -A --grace-period=1 --wait=true --timeout=60s >/dev/null 2>&1 || true
  fi
  log "stopping the control plane and the kubelet"
  for n in kubelet kube-scheduler kube-controller-manager kube-apiserver etcd; do stop_pid "$n"; done
  log "stopping containers"
  if [ -S "$CTR_SOCK" ]; then
    for id in $(ctr -a "$CTR_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr -a "$CTR_SOCK" -n k8s.io tasks kill -s KILL "$id" >/dev/null 2>&1 || true
    done
    sleep 1
    for id in $(ctr -a "$CTR_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr -a "$CTR_SOCK" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true
    done
  fi
  stop_pid containerd
  # Shims outlive containerd; ours are the ones serving its socket.
  for d in /proc/[0-9]*; do
    if { tr '\0' ' ' < "$d/cmdline"; } 2>/dev/null | grep -q "containerd-shim-runc-v2 .*-address $CTR_SOCK"; then
      kill -KILL "${d#/proc/}" 2>/dev/null || true
    fi
  done
  rm -f "$CTR_SOCK" "$CTR_SOCK.ttrpc" /run/containerd/debug.sock
  unmount_under "$KUBELET_DIR"
  unmount_under /run/containerd
  unmount_under /var/lib/containerd
  for ns in /run/netns/cni-*; do [ -e "$ns" ] && { umount "$ns" 2>/dev/null || true; rm -f "$ns"; }; done
  ip link del nodesnape2e0 2>/dev/null || true
  ip route del unreachable 10.0.0.0/24 2>/dev/null || true
  # The kubelet's cgroups, deepest first.
  for c in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/kubepods.slice; do
    [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  if [ -f "$STATE/sysctls" ]; then
    while IFS== read -r s v; do sysctl -q -w "$s=$v" >/dev/null 2>&1 || true; done < "$STATE/sysctls"
  fi
  local created=()
  [ -f "$STATE/created" ] && mapfile -t created < "$STATE/created"
  stop_pid journald
  for d in "${created[@]}"; do [ -n "$d" ] && rm -rf "$d"; done
  rm -rf "$STATE"
  log "down"
}

case "${1:-}" in
  build) cmd_build ;;
  up) cmd_up ;;
  down) cmd_down ;;
  *) echo "usage: $0 build|up|down" >&2; exit 2 ;;
esac
