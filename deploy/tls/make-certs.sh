#!/usr/bin/env bash
# A private CA, a server certificate and client certificates for the planner service, with openssl.
#
#   bash deploy/tls/make-certs.sh OUT_DIR [CLIENT_NAME ...]
#
# Writes OUT_DIR/ca.crt (give it to clients: --tls-ca, and to the server for mutual TLS:
# --tls-client-ca), OUT_DIR/server.{crt,key} (--tls-cert/--tls-key) and OUT_DIR/CLIENT_NAME.{crt,key}
# per client (the client's --tls-cert/--tls-key; CLIENT_NAME is its common name, which the server
# uses as the caller's identity). The server certificate names the hosts in L3P_TLS_SAN
# (default DNS:localhost,IP:127.0.0.1); clients must connect by one of them (or pass
# --tls-server-name). Keys are ECDSA P-256, unencrypted, readable by the owner only.
# For production, use certificates from your own PKI; this is for development and tests.
set -euo pipefail

out=${1:?usage: make-certs.sh OUT_DIR [CLIENT_NAME ...]}
shift
san=${L3P_TLS_SAN:-DNS:localhost,IP:127.0.0.1}
days=${L3P_TLS_DAYS:-365}
mkdir -p "$out"
umask 077

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# sign NAME SUBJECT EXTENSIONS: NAME.key + a certificate for it signed by the CA
sign() {
    key "$out/$1.key"
    openssl req -new -key "$out/$1.key" -subj "$2" -out "$out/$1.csr"
    openssl x509 -req -in "$out/$1.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" -CAcreateserial \
        -days "$days" -sha256 -extfile <(printf '%s\n' "$3") -out "$out/$1.crt" 2>/dev/null
    rm -f "$out/$1.csr"
}

key "$out/ca.key"
openssl req -x509 -new -key "$out/ca.key" -subj "/CN=l3p-dev-ca" -days "$days" -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" -out "$out/ca.crt"
sign server "/CN=l3p-server" \
    "basicConstraints=CA:FALSE
keyUsage=digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=$san"
for name in "$@"; do
    sign "$name" "/CN=$name" \
        "basicConstraints=CA:FALSE
keyUsage=digitalSignature
extendedKeyUsage=clientAuth"
done
rm -f "$out/ca.srl"
chmod 644 "$out"/*.crt
echo "wrote $out: ca.crt, server.crt/.key${*:+, client pairs for: $*}"
