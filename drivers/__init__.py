"""Protocol drivers: the only place that imports pyghmi and sushy, and the only
place that maps their exceptions to bmaas faults. Found through the
``bmaas.drivers`` entry-point group."""
