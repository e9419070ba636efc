"""The benchmark pod: podsetup, driver, proxy, acceptance, telemetry, publish, with results, and a
study's tuner (tuner, lease); pod.py says how the pod is built from them.

Every module here is shipped to the pod (benchmark/pod.py POD_MODULES, by ConfigMap) and runs there
on Python 3.11 with the standard library and the hash-locked packages of requirements-pod.lock.
The operator's side, over the downloaded results, is reporting/.
"""
