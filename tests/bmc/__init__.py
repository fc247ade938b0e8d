"""Tests of the BMC actions and their backends: IPMI through the real ipmitool against
OpenIPMI's ipmi_sim, Redfish against the simulated cluster's BMCs."""
