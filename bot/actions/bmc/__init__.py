"""Out-of-band actions through the node's BMC: power, the event log, sensors, firmware.

One interface (`protocol.Bmc`), two real protocols behind it: IPMI through `ipmitool -I
lanplus` (`ipmi`) and Redfish over HTTPS (`redfish`). The inventory (`inventory`) decides
which one a node has and where its BMC answers; `power` and `reads` hold the actions.
"""

__all__: list[str] = []
