"""The person's controller in the Dolphin user folder ("home") shine-bot starts Dolphin with.

libmelee starts Dolphin with a temporary user folder: an empty one, or a copy of the
person's own (``Console(dolphin_home_path=DIR, copy_home_directory=True)``). It writes
the bot's port itself (``Controller`` -> ``Console.setup_dolphin_controller``: a
``[GCPad<n>]`` section mapped to its pipe and ``SIDevice<n-1> = 6`` in Dolphin.ini) and
nothing for any other port, so in an empty folder the person's controller does
nothing. This module configures the person's port, the way Shine's own Dolphin user
folder does for ``shine-worker play --human-port`` (``bridge/src/dolphin/userdir.rs``):

- the GameCube controller adapter: ``[Core] SIDevice<n-1> = 12`` in
  ``Config/Dolphin.ini`` (Dolphin's ``SIDEVICE_WIIU_ADAPTER``); Dolphin reads the
  adapter's port ``n`` directly, so no mapping is needed;
- any other pad, from a Dolphin GCPad profile (what Dolphin's Controllers window saves
  as ``Config/Profiles/GCPad/NAME.ini``): ``SIDevice<n-1> = 6`` (a standard controller)
  and the profile's ``[Profile]`` lines, its ``Device`` among them, as the port's
  ``[GCPad<n>]`` section of ``Config/GCPadNew.ini``;
- the person's own home: whatever the copy says for that port, written by nobody
  (:func:`home_port` checks that something is plugged there).

Only the person's port is touched: the bot's section and ``SIDevice`` stay as libmelee
wrote them, and every other section and key stays as it was. Keys are matched without
regard to case, as Dolphin reads them (libmelee's configparser writes them in lower
case: ``sidevice1``); a key this module writes replaces every spelling of it.
"""

import configparser
import os
from dataclasses import dataclass
from typing import List, Optional, Tuple

#: Dolphin's numbers for the device on a serial port (``SIDevices``,
#: ``Source/Core/Core/HW/SI/SI_Device.h``; libmelee's ``ControllerType`` values).
SI_NONE = 0
SI_GC_CONTROLLER = 6
SI_WIIU_ADAPTER = 12

ADAPTER = "adapter"
PROFILE = "profile"
HOME = "home"


class ConfigError(ValueError):
    """A controller setting or Dolphin home that cannot work, with what to do."""


@dataclass(frozen=True)
class HumanController:
    """The person's controller: ``kind`` is :data:`ADAPTER`, :data:`PROFILE` (a
    standard pad with ``device`` and ``mapping`` from a GCPad profile) or :data:`HOME`
    (what the copied Dolphin home has)."""

    kind: str
    device: str = ""
    mapping: Tuple[Tuple[str, str], ...] = ()
    source: str = ""

    def describe(self, port: int) -> str:
        """The controller on game port ``port``, for the log."""
        if self.kind == ADAPTER:
            return f"the GameCube controller adapter (plug into its port {port})"
        if self.kind == PROFILE:
            return f"{self.device} (mapped by {self.source or 'a GCPad profile'})"
        return "your Dolphin home's controller"


def adapter() -> HumanController:
    return HumanController(ADAPTER)


def home() -> HumanController:
    return HumanController(HOME)


def parse_profile(text: str, source: str = "the profile") -> HumanController:
    """A standard pad from a Dolphin GCPad profile's text: the ``key = value`` lines
    of its ``[Profile]`` section, ``Device`` among them (Shine's
    ``HumanPad::from_profile``)."""
    in_profile = False
    device: Optional[str] = None
    mapping: List[Tuple[str, str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            in_profile = line == "[Profile]"
            continue
        if not in_profile or not line or line.startswith(("#", ";")):
            continue
        if "=" not in line:
            raise ConfigError(f"{source}: the line {line!r} is not `key = value`")
        k, v = (s.strip() for s in line.split("=", 1))
        if k.lower() == "device":
            device = v
        else:
            mapping.append((k, v))
    if not mapping:
        raise ConfigError(
            f"{source} has no [Profile] section with button mappings; map your pad in Dolphin "
            "(Controllers, Standard Controller, Configure), save a profile there and pass that file"
        )
    if not device:
        raise ConfigError(f"{source} names no Device; add the line `Device = ...` Dolphin wrote for your pad to its [Profile] section")
    return HumanController(PROFILE, device=device, mapping=tuple(mapping), source=source)


def load_profile(path: str) -> HumanController:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read the GCPad profile {path!r}: {getattr(e, 'strerror', None) or e}") from None
    return parse_profile(text, path)


def _parser() -> configparser.ConfigParser:
    # Case kept (we match case-insensitively ourselves); no interpolation, so a '%'
    # in a mapping is written as it is; duplicate keys tolerated, as Dolphin does.
    p = configparser.ConfigParser(interpolation=None, strict=False)
    p.optionxform = str  # type: ignore[assignment]
    return p


def _read(path: str) -> configparser.ConfigParser:
    p = _parser()
    if os.path.isfile(path):
        try:
            p.read(path, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError) as e:
            raise ConfigError(f"cannot read {path}: {e}") from None
    return p


def _get(p: configparser.ConfigParser, section: str, key: str) -> Optional[str]:
    if not p.has_section(section):
        return None
    found = None
    for k, v in p.items(section):
        if k.lower() == key.lower():
            found = v  # the last spelling wins, as in a file read line by line
    return found


def _set(p: configparser.ConfigParser, section: str, key: str, value: str) -> None:
    if not p.has_section(section):
        p.add_section(section)
    for k in [k for k in p.options(section) if k.lower() == key.lower()]:
        p.remove_option(section, k)
    p.set(section, key, value)


def _write(p: configparser.ConfigParser, path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        p.write(f)


def dolphin_ini(home_dir: str) -> str:
    return os.path.join(home_dir, "Config", "Dolphin.ini")


def gcpad_ini(home_dir: str) -> str:
    return os.path.join(home_dir, "Config", "GCPadNew.ini")


def si_key(port: int) -> str:
    """Dolphin.ini's key for game port ``port`` (1-4): ``SIDevice0`` for port 1."""
    return f"SIDevice{port - 1}"


def configure_port(home_dir: str, port: int, controller: HumanController) -> None:
    """Configure game port ``port`` (1-4) of the Dolphin user folder ``home_dir`` for
    the person's ``controller``, touching nothing else. :data:`HOME` writes nothing."""
    if not 1 <= port <= 4:
        raise ValueError(f"port {port} is not a controller port (1-4)")
    if controller.kind == HOME:
        return
    if controller.kind not in (ADAPTER, PROFILE):
        raise ValueError(f"unknown controller kind {controller.kind!r}")
    ini = _read(dolphin_ini(home_dir))
    device = SI_WIIU_ADAPTER if controller.kind == ADAPTER else SI_GC_CONTROLLER
    _set(ini, "Core", si_key(port), str(device))
    _write(ini, dolphin_ini(home_dir))
    if controller.kind == PROFILE:
        pads = _read(gcpad_ini(home_dir))
        section = f"GCPad{port}"
        # The whole section is the profile's: nothing of an older mapping lingers.
        if pads.has_section(section):
            pads.remove_section(section)
        pads.add_section(section)
        pads.set(section, "Device", controller.device)
        for k, v in controller.mapping:
            _set(pads, section, k, v)
        _write(pads, gcpad_ini(home_dir))


#: What both Slippi Dolphins put on a port whose ``SIDevice`` key is missing: the
#: GameCube controller adapter, on every port (Ishiiruka's ``ConfigManager.cpp``
#: reads ``SIDevice%i`` with the default ``SIDEVICE_WIIU_ADAPTER``; the mainline Slippi
#: Dolphin's ``Config/MainSettings.cpp`` declares ``SIDevice0`` to ``SIDevice3`` with
#: it). Mainline Dolphin's default, a standard controller on port 1 and nothing on the
#: others, is not theirs.
SLIPPI_DEFAULT_SI = SI_WIIU_ADAPTER


def si_device(home_dir: str, port: int) -> int:
    """The device type Slippi Dolphin puts on game port ``port`` with this user folder:
    its ``SIDevice<port-1>``, or Slippi's default where the key is missing
    (:data:`SLIPPI_DEFAULT_SI`, the adapter)."""
    v = _get(_read(dolphin_ini(home_dir)), "Core", si_key(port))
    if v is None:
        return SLIPPI_DEFAULT_SI
    try:
        return int(v)
    except ValueError:
        raise ConfigError(f"{dolphin_ini(home_dir)}: {si_key(port)} = {v!r} is not a number") from None


def check_home(home_dir: str) -> None:
    """``home_dir`` must be a Dolphin user folder: the one holding ``Config/Dolphin.ini``."""
    if not os.path.exists(home_dir):
        raise ConfigError(f"--dolphin-home {home_dir!r} does not exist")
    if not os.path.isdir(home_dir):
        raise ConfigError(f"--dolphin-home {home_dir!r} is not a folder")
    if not os.path.isfile(dolphin_ini(home_dir)):
        raise ConfigError(
            f"--dolphin-home {home_dir!r} has no Config/Dolphin.ini: give Slippi Dolphin's user folder, the one "
            "holding Config/ (on Linux ~/.config/SlippiOnline for the Slippi Launcher's Ishiiruka, ~/.config/slippi-dolphin/netplay-beta "
            "for its mainline build), after Dolphin has run once"
        )


def home_port(home_dir: str, port: int) -> str:
    """What the person's own Dolphin home plugs into game port ``port``, described for
    the log; a :class:`ConfigError` naming the fixes when it is nothing (their
    controller would do nothing) or a bot's pipe."""
    dev = si_device(home_dir, port)
    fixes = (
        f"set port {port} to your controller in Dolphin (Controllers), pass the port your controller is on "
        "as --opponent-port, or pass --human-controller adapter or --human-profile FILE"
    )
    if dev == SI_NONE:
        raise ConfigError(f"your Dolphin home {home_dir!r} has nothing plugged into port {port} ({si_key(port)} = 0): {fixes}")
    if dev == SI_WIIU_ADAPTER:
        return f"the GameCube controller adapter (port {port} of the adapter), from your Dolphin home"
    if dev == SI_GC_CONTROLLER:
        device = _get(_read(gcpad_ini(home_dir)), f"GCPad{port}", "Device")
        if device and device.startswith("Pipe/"):
            raise ConfigError(f"your Dolphin home {home_dir!r} maps port {port} to a bot's pipe ({device}), not a controller: {fixes}")
        if not device:
            return "a standard controller with no Device in GCPadNew.ini (Dolphin's defaults), from your Dolphin home"
        return f"a standard controller ({device}), from your Dolphin home"
    return f"Dolphin device type {dev}, from your Dolphin home"
