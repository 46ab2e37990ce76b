"""`--tls` of `rtrace serve` and `rtrace record`: the listening side speaks `wss://`.

Clients that open only `wss://` URLs (the openai Node SDK) need a server certificate they trust. Without
`--cert/--key`, rtrace makes its own with the `cryptography` package (the `rtrace-cli[tls]` extra): a local
certificate authority and a server certificate it signed for `localhost`, `127.0.0.1`, `::1` (and the bound host),
kept in one folder (`tls_dir`: `$RTRACE_TLS_DIR`, else `$XDG_CACHE_HOME/rtrace/tls`, else `~/.cache/rtrace/tls`)
and reused between runs, so a client told once to trust `ca.pem` keeps trusting it. A server certificate that
expires within a week, or does not name the bound host, is made again (the authority is kept); the private keys are
written owner-only. What a runtime needs to trust the authority is one environment variable (`trust_env`).

With `--cert FILE --key FILE` nothing is made: the files are loaded as they are (a chain in `--cert`), and the
variables name `--cert` (right for a self-signed certificate; else point them at the authority that signed it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import ipaddress
import os
import ssl
from pathlib import Path

#: The extra that brings `cryptography`; named by every message about a missing one.
EXTRA = "rtrace-cli[tls]"
#: Names a made server certificate always covers (the loopback host names a client may be given).
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
#: A made server certificate lives this long, and is made again when less than `_RENEW` of it is left.
_LIFETIME = datetime.timedelta(days=365)
_RENEW = datetime.timedelta(days=7)
_CA_LIFETIME = datetime.timedelta(days=3650)


class TlsError(ValueError):
    """A certificate that cannot be made or loaded, in words for people (a usage error of the command)."""


@dataclasses.dataclass(frozen=True)
class TlsFiles:
    """The server's certificate chain and key, and the file a client trusts (`ca`)."""

    cert: Path
    key: Path
    ca: Path
    #: The folder rtrace made them in (None: given with --cert/--key).
    folder: Path | None = None
    #: Whether this run made the server certificate (False: reused, or given).
    made: bool = False

    def context(self) -> ssl.SSLContext:
        """A server-side context with the chain loaded; raises TlsError naming the file that is wrong."""
        return server_context(self.cert, self.key)


def tls_dir() -> Path:
    """Where made certificates are kept (see the module docstring)."""
    explicit = os.environ.get("RTRACE_TLS_DIR")
    if explicit:
        return Path(explicit).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME")
    base = Path(cache).expanduser() if cache else Path.home() / ".cache"
    return base / "rtrace" / "tls"


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """An `ssl.SSLContext` for the listening side with `cert` (a chain, leaf first) and `key`."""
    for path, option in ((cert, "--cert"), (key, "--key")):
        if not path.is_file():
            raise TlsError(f"{option} {path}: no such file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(cert), str(key))
    except ssl.SSLError as e:
        why = e.reason or e
        raise TlsError(f"--cert {cert} / --key {key}: not a certificate chain and its private key ({why})") from None
    except OSError as e:
        raise TlsError(f"--cert {cert} / --key {key}: {e.strerror or e}") from None
    return context


def given(cert: str | os.PathLike[str], key: str | os.PathLike[str]) -> TlsFiles:
    """`--cert/--key`: loaded to check them now (a mistake is a usage error, not a failed handshake later)."""
    files = TlsFiles(Path(cert), Path(key), Path(cert))
    files.context()
    return files


def names_for(host: str) -> list[str]:
    """The names a server certificate for a server bound to `host` covers: the loopback ones, and `host` itself
    unless it is a wildcard address."""
    names = list(_LOOPBACK_NAMES)
    if host and host not in names and host not in ("0.0.0.0", "::", ""):
        names.append(host)
    return names


def ensure(host: str = "127.0.0.1", folder: Path | None = None) -> TlsFiles:
    """The made certificate for a server bound to `host`, from `folder` (default `tls_dir()`): reused when it is
    there, covers `host` and is good for more than a week; else made (and the authority too if it is missing).
    Raises TlsError when `cryptography` is missing or the folder cannot be written."""
    folder = folder or tls_dir()
    return _kept(folder, names_for(host), folder / "server.pem", folder / "server-key.pem")


def for_host(host: str, folder: Path | None = None) -> TlsFiles:
    """A certificate for the name `host` signed by the authority of `folder` (default `tls_dir()`), kept in its
    `hosts/` folder and reused as `ensure` reuses the server's: what `--intercept` serves a realtime host with."""
    folder = folder or tls_dir()
    stem = "".join(c if c.isalnum() or c in ".-" else "_" for c in host.lower())
    hosts = folder / "hosts"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        hosts.mkdir(exist_ok=True, mode=0o700)
    except OSError as e:
        raise TlsError(f"--intercept: cannot keep the certificates in {hosts}: {e.strerror or e}") from None
    files = _kept(folder, [host], hosts / f"{stem}.pem", hosts / f"{stem}-key.pem")
    return dataclasses.replace(files, folder=folder)


def _kept(folder: Path, names: list[str], cert: Path, key: Path) -> TlsFiles:
    """The certificate `cert`/`key` for `names`, signed by the authority of `folder`: reused when usable, else made
    (the authority too if it is missing)."""
    ca_cert, ca_key = folder / "ca.pem", folder / "ca-key.pem"
    try:
        import cryptography  # noqa: F401
    except ImportError:
        raise TlsError(
            f"--tls needs the 'cryptography' package to make a certificate: pip install '{EXTRA}' "
            "(or give your own with --cert FILE --key FILE)"
        ) from None
    try:
        if _usable(cert, key, ca_cert, names):
            return TlsFiles(cert, key, ca_cert, folder)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        authority = _load_authority(ca_cert, ca_key)
        if authority is None:
            authority = _make_authority()
            _write(ca_key, _key_pem(authority[1]), private=True)
            _write(ca_cert, _cert_pem(authority[0]), private=False)
        leaf, leaf_key = _make_server(authority, names)
        _write(key, _key_pem(leaf_key), private=True)
        _write(cert, _cert_pem(leaf) + _cert_pem(authority[0]), private=False)
    except OSError as e:
        why = e.strerror or e
        raise TlsError(f"--tls: cannot keep the certificate in {folder}: {why} (set RTRACE_TLS_DIR)") from None
    return TlsFiles(cert, key, ca_cert, folder, made=True)


def trust_env(files: TlsFiles) -> list[tuple[str, str, str]]:
    """(variable, value, who reads it): the one variable each runtime needs to trust the server."""
    ca = str(files.ca)
    return [
        ("NODE_EXTRA_CA_CERTS", ca, "Node (added to its trusted authorities)"),
        ("SSL_CERT_FILE", ca, "Python ssl: websockets, aiohttp, httpx (replaces the default authorities)"),
        ("REQUESTS_CA_BUNDLE", ca, "Python requests"),
    ]


def trust_bundle(files: TlsFiles) -> Path:
    """`ca-bundle.pem` beside the authority: it and this system's own authorities (`ssl`'s default file), for the
    variables that replace a runtime's authorities (`SSL_CERT_FILE`): a client that goes through `--intercept`
    still trusts the hosts it reaches untouched. Raises TlsError when it cannot be written."""
    import ssl as _ssl

    paths = _ssl.get_default_verify_paths()
    system = b""
    for candidate in (paths.cafile, paths.openssl_cafile):
        if candidate and os.path.isfile(candidate):
            with contextlib.suppress(OSError):
                system = Path(candidate).read_bytes()
                break
    bundle = files.ca.with_name("ca-bundle.pem")
    try:
        _write(bundle, files.ca.read_bytes() + b"\n" + system, private=False)
    except OSError as e:
        raise TlsError(f"--intercept: cannot write {bundle}: {e.strerror or e}") from None
    return bundle


def tls_files(tls: bool, cert: str | None, key: str | None, host: str) -> TlsFiles | None:
    """`--tls` (a certificate made and kept by `rtrace.net.link.tls.ensure`), `--cert/--key` (given; they imply --tls),
    or neither (None). Raises ValueError (`TlsError`) with a message for people."""
    if (cert is None) != (key is None):
        raise TlsError("--cert and --key go together: the certificate chain and its private key")
    if cert is not None and key is not None:
        return given(cert, key)
    return ensure(host) if tls else None


# -- made with `cryptography` ---------------------------------------------------------------------------------------


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _usable(cert: Path, key: Path, ca: Path, names: list[str]) -> bool:
    """Whether the kept server certificate can serve again: all three files, good for more than `_RENEW`, and
    naming every one of `names`."""
    from cryptography import x509 as x

    if not (cert.is_file() and key.is_file() and ca.is_file()):
        return False
    try:
        leaf = x.load_pem_x509_certificate(cert.read_bytes())
        san = leaf.extensions.get_extension_for_class(x.SubjectAlternativeName).value
    except (ValueError, x.ExtensionNotFound):
        return False
    if leaf.not_valid_after_utc - _now() < _RENEW:
        return False
    covered = {str(v) for v in san.get_values_for_type(x.DNSName)}
    covered |= {str(v) for v in san.get_values_for_type(x.IPAddress)}
    return all(_canonical(n) in covered for n in names)


def _canonical(name: str) -> str:
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


def _load_authority(cert: Path, key: Path) -> tuple[object, object] | None:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    if not (cert.is_file() and key.is_file()):
        return None
    try:
        ca = x509.load_pem_x509_certificate(cert.read_bytes())
        ca_key = serialization.load_pem_private_key(key.read_bytes(), password=None)
    except (ValueError, TypeError):
        return None
    if ca.not_valid_after_utc - _now() < _LIFETIME:
        return None  # it would end before a server certificate made now
    return ca, ca_key


def _make_authority() -> tuple[object, object]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "rtrace"),
            x509.NameAttribute(NameOID.COMMON_NAME, "rtrace local authority (rtrace serve --tls)"),
        ]
    )
    now = _now()
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + _CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _make_server(authority: tuple[object, object], names: list[str]) -> tuple[object, object]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca, ca_key = authority
    assert isinstance(ca, x509.Certificate) and isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    alt: list[x509.GeneralName] = []
    for n in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            alt.append(x509.DNSName(n))
    now = _now()
    ca_ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + _LIFETIME)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def _key_pem(key: object) -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert_pem(cert: object) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    assert isinstance(cert, x509.Certificate)
    return cert.public_bytes(serialization.Encoding.PEM)


def _write(path: Path, data: bytes, private: bool) -> None:
    """Write `path` whole (a temporary file renamed over it); a private key owner-only from its first byte."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


__all__ = [
    "EXTRA",
    "TlsError",
    "TlsFiles",
    "ensure",
    "given",
    "names_for",
    "server_context",
    "tls_dir",
    "tls_files",
    "trust_env",
]
