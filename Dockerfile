# syntax=docker/dockerfile:1
# dmarcd in a container: a static binary (no cgo) on a small base, run as
# a non-root user, with volumes for its data and the geolocation databases.
# As in the README:
#
#   docker build -t dmarcd --build-arg VERSION=$(git describe --always --dirty) .
#   docker run -d --name dmarcd -p 127.0.0.1:8080:8080 -p 25:2525 \
#       -e DMARCD_REPORTING_DOMAIN=reports.example.net \
#       -e DMARCD_GEOIP_CITY=/geoip/GeoLite2-City.mmdb -e DMARCD_GEOIP_ASN=/geoip/GeoLite2-ASN.mmdb \
#       -v dmarcd-data:/data -v /var/lib/GeoIP:/geoip:ro dmarcd
#   docker exec dmarcd cat /data/bootstrap-key && docker exec dmarcd rm /data/bootstrap-key
#
# Inside the container dmarcd listens on 0.0.0.0 (DMARCD_LISTEN below), the
# only way to be reached from outside it; -p 127.0.0.1:8080:8080 then keeps
# the web interface and the API on the host's loopback, for a TLS reverse
# proxy in front (see the README: --public-url, --trusted-proxy). SMTP is
# published on every address: reporters reach it from the Internet.
#
# The binary stage's build command is run by a test (packaging_test.go),
# so it stays buildable without a Docker daemon.

FROM golang:1.26-alpine AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/dmarcd/dmarcd/cli.Version=${VERSION}" -o /out/dmarcd .
# The data volume's mount point, owned by the user dmarcd runs as.
RUN mkdir -p /out/data /out/geoip && chown 65532:65532 /out/data && chmod 0700 /out/data

FROM alpine:3.22
RUN apk add --no-cache ca-certificates tzdata
COPY --from=build /out/dmarcd /usr/local/bin/dmarcd
COPY --from=build --chown=65532:65532 /out/data /data
COPY --from=build /out/geoip /geoip
USER 65532:65532
ENV DMARCD_DATA_DIR=/data \
    DMARCD_LISTEN=0.0.0.0:8080 \
    DMARCD_SMTP_LISTEN=0.0.0.0:2525 \
    DMARCD_LOG_FORMAT=json
VOLUME ["/data", "/geoip"]
EXPOSE 8080 2525
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD wget -q -O /dev/null http://127.0.0.1:8080/readyz || exit 1
ENTRYPOINT ["/usr/local/bin/dmarcd"]
CMD ["serve"]
