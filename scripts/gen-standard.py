#!/usr/bin/env python3
"""Regenerate crates/allot-core/src/standard.rs from os-resource-classes and os-traits.

Usage: pip install os-resource-classes os-traits && scripts/gen-standard.py
"""
import os
import sys

import os_resource_classes as orc
import os_traits
from importlib.metadata import version

classes = orc.STANDARDS
traits = sorted(os_traits.get_traits())
out = [
    "//! The standard resource classes and traits every deployment has.",
    "//!",
    "//! Generated from os-resource-classes %s and os-traits %s (the releases that"
    % (version("os-resource-classes"), version("os-traits")),
    "//! OpenStack Placement 16.0 ships with); regenerate with `scripts/gen-standard.py`",
    "//! when a new release adds names. The order of [`RESOURCE_CLASSES`] is the",
    "//! release's order, which Placement uses as the classes' ids and listing order.",
    "",
    "/// Standard resource classes, in the order of os-resource-classes.",
    "pub const RESOURCE_CLASSES: &[&str] = &[",
]
out += ['    "%s",' % c for c in classes]
out += ["];", "", "/// Standard traits, sorted by name.", "pub const TRAITS: &[&str] = &["]
out += ['    "%s",' % t for t in traits]
out += ["];", ""]
here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "..", "crates", "allot-core", "src", "standard.rs")
with open(path, "w") as f:
    f.write("\n".join(out))
print("wrote %d classes and %d traits to %s" % (len(classes), len(traits), path), file=sys.stderr)
