"""Benchmarks: ``hwlab bench NAME`` (see :mod:`bmaas.hwlab.harness.bench.cli`), figures
measured side by side in one run on private loopback labs. Never timed tests.

One module per scenario (``fault_detection``, ``fleet_sweep``, ``goodput``,
``lab_scale``, ``overhead``), each with an ``Options`` dataclass (and its
``smoke()`` size) and ``run(options) -> Report``; ``report`` shows a report
four ways; ``common``, ``ipmitool``, ``clients`` and ``blind`` are what they
share. ``proxy_overhead`` measures hwlab's proxy (``python -m``).
"""
