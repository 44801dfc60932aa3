"""Broker configuration from a server.properties file: Java's properties syntax and
Kafka's listener settings (unit tests of jocko_py.broker.config only)."""

from __future__ import annotations

from pathlib import Path

from jocko_py.broker.config import build_config, parse_properties


def test_properties_syntax_follows_java_util_properties() -> None:
    text = "\n".join(
        [
            "# a comment",
            "! another comment",
            "   ",
            "a=1",
            "b : 2",
            "c 3",
            r"key\ with\ space=four",
            r"list=x,\\",  # escaped backslash at the end: no continuation
            "multi=first,\\",
            "      second",
            r"tab=a\tb",
            r"uni=\u00e9",
            "url=PLAINTEXT://host:9092",
            "empty=",
        ]
    )
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "key with space": "four",
        "list": "x,\\",
        "multi": "first,second",
        "tab": "a\tb",
        "uni": "\u00e9",
        "url": "PLAINTEXT://host:9092",
        "empty": "",
    }


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "server.properties"
    p.write_text(text)
    return p


def test_listeners_and_advertised_listeners_set_the_addresses(tmp_path: Path) -> None:
    cfg = build_config(
        config_file=write(
            tmp_path,
            "listeners=PLAINTEXT://127.0.0.1:9193\n"
            "advertised.listeners=PLAINTEXT://broker-1.example:19193\n",
        )
    )
    assert (cfg.host, cfg.port) == ("127.0.0.1", 9193)
    assert (cfg.advertised_host, cfg.advertised_port) == ("broker-1.example", 19193)


def test_listener_with_empty_host_binds_all_interfaces_and_advertises_localhost(
    tmp_path: Path,
) -> None:
    cfg = build_config(config_file=write(tmp_path, "listeners=PLAINTEXT://:9193\n"))
    assert (cfg.host, cfg.port) == ("0.0.0.0", 9193)
    assert (cfg.advertised_host, cfg.advertised_port) == ("localhost", 9193)


def test_named_listener_mapped_to_plaintext_is_the_inter_broker_one(tmp_path: Path) -> None:
    cfg = build_config(
        config_file=write(
            tmp_path,
            "listeners=SSL://:9194,INTERNAL://127.0.0.1:9195\n"
            "listener.security.protocol.map=INTERNAL:PLAINTEXT,SSL:SSL\n",
        )
    )
    assert (cfg.host, cfg.port) == ("127.0.0.1", 9195)
    assert cfg.inter_broker_listener == "INTERNAL"
    assert [(x.name, x.security_protocol, x.host, x.port) for x in cfg.listeners] == [
        ("INTERNAL", "PLAINTEXT", "127.0.0.1", 9195), ("SSL", "SSL", "0.0.0.0", 9194)]


def test_flags_win_over_the_file(tmp_path: Path) -> None:
    cfg = build_config(
        config_file=write(tmp_path, "listeners=PLAINTEXT://127.0.0.1:9193\n"),
        broker_addr="127.0.0.1:9300",
        advertised_addr="public.example:9400",
    )
    assert (cfg.host, cfg.port) == ("127.0.0.1", 9300)
    assert (cfg.advertised_host, cfg.advertised_port) == ("public.example", 9400)


def test_no_listener_settings_default_to_localhost_9092(tmp_path: Path) -> None:
    cfg = build_config(config_file=write(tmp_path, "num.partitions=3\n"))
    assert (cfg.host, cfg.port, cfg.advertised_port) == ("localhost", 9092, 9092)
    assert cfg.properties["num.partitions"] == "3"
