"""hwlab: emulated IPMI and Redfish BMCs over simulated machines, with seeded,
replayable faults, so lab CI can prove provisioning code survives bad hardware."""
