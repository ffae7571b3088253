"""The two test tiers, in one list: what ``pytest -m "not slow"`` (the fast tier, run on every change)
leaves to the full suite (what CI runs).

Slow is what costs seconds of its own: starting a real torch child or a microcheck run, a torchrun/srun
launch, a CLI run end to end through the probes, a deadline a test waits out, and the large
property-based (hypothesis) runs. ``tests/conftest.py`` marks these ``slow`` at collection; nothing is
decorated in the test files.

An entry is ``file::test`` (every parametrization of it) or ``file::test[id]`` (one). A file in
SLOW_ONLY_FILES is slow as a whole; every other test file keeps fast tests, and ``tests/test_tiers.py``
and the collection hook hold that (a fast tier that silently dropped an area would look green).
"""

from __future__ import annotations

#: Files with no fast test at all (none today: every area keeps a fast test).
SLOW_ONLY_FILES: frozenset[str] = frozenset()

#: Fewest tests the fast tier may collect from the whole suite (today ~1,990 of ~2,080).
MIN_FAST_TESTS = 1500

SLOW_TESTS: frozenset[str] = frozenset({
    # Real torch children and microcheck runs (the CPU build of torch; inductor compiles for ~80 s).
    "test_micro.py::test_compile_runs_inductor_on_the_cpu",
    "test_micro.py::test_hanging_child_is_a_timeout_within_the_deadline_and_keeps_earlier_results",
    "test_micro.py::test_a_dead_worker_is_noticed_even_when_sigchld_misses_the_main_thread",
    "test_micro.py::test_full_cpu_run_passes_and_is_fast",
    "test_micro.py::test_nan_in_matmul_output_never_passes",
    "test_micro.py::test_a_named_device_that_does_not_exist_fails_the_device_touch",
    "test_micro.py::test_segfaulting_child_is_reported_as_crashed_with_the_signal",
    "test_micro.py::test_corrupted_matmul_output_fails_the_comparison",
    "test_micro.py::test_a_worker_dying_during_torchs_lazy_imports_is_not_lost",
    "test_micro.py::test_sigbus_in_a_dataloader_worker_is_the_dev_shm_finding",
    "test_one_torch_child.py::test_a_microcheck_hang_is_its_timeout_and_the_torch_facts_are_kept",
    "test_one_torch_child.py::test_check_device_cpu_end_to_end_reports_both_from_one_child",
    "test_one_torch_child.py::test_one_import_serves_the_torch_facts_and_then_the_microchecks",
    "test_one_torch_child.py::test_check_device_cpu_prestarts_the_one_torch_child_and_the_probes_adopt_it",
    "test_one_torch_child.py::test_a_microcheck_segfault_is_its_crash_and_the_torch_facts_are_kept",
    "test_one_torch_child.py::test_a_torch_import_that_hangs_is_the_facts_timeout_and_a_microcheck_skip",
    "test_one_torch_child.py::test_a_lazy_import_that_fails_ahead_of_the_check_fails_again_inside_it",
    "test_one_torch_child.py::test_a_bus_error_in_a_dataloader_worker_is_the_dev_shm_finding",
    "test_one_torch_child.py::test_without_planned_microchecks_the_torch_child_is_the_plain_one",
    "test_one_torch_child.py::test_distributed_keeps_its_rank_childs_torch_facts",
    "test_python_probe.py::test_real_cpu_torch",
    "test_python_probe.py::test_torch_import_that_hangs_is_a_timeout",
    "test_prestart.py::test_a_plain_check_starts_the_torch_child_and_the_probe_adopts_it",
    "test_prestart.py::test_a_command_for_another_script_leaves_the_early_child_alone",
    # torchrun / srun launches (the module fixture ``faults`` runs four launches for its tests).
    "test_distributed.py::test_two_ranks_healthy_report_and_json",
    "test_distributed.py::test_four_ranks_one_odd_rank_is_named",
    "test_distributed.py::test_srun_launched_tasks",
    "test_distributed.py::test_stalled_rank_is_named_within_the_deadline",
    "test_distributed.py::test_exited_rank_is_named",
    "test_distributed.py::test_rank_that_never_arrives_is_named",
    "test_distributed.py::test_two_nodes_one_with_another_environment",
    "test_distributed.py::test_port_in_use_is_reported_not_hung",
    # CLI runs end to end through every probe (with a torch child), and deadlines waited out.
    "test_fleet_store.py::test_the_readme_commands_run",  # two `fleet` CLI runs (pyarrow imported in each)
    "test_cli.py::test_check_runs_end_to_end_on_this_machine",
    "test_cli.py::test_report_json_validates_against_the_shipped_schema",
    "test_cli.py::test_markdown_report_is_ready_for_a_github_issue",
    "test_cpu_only.py::test_check_on_this_gpu_less_machine_passes_fail_on_warn",
    "test_exposure.py::test_the_probe_names_each_service_and_where_it_listens",
    "test_factkeys.py::test_a_real_run_writes_only_registry_keys_of_the_registry_types",
    "test_report_schema.py::test_a_live_report_names_its_schema_and_validates",
    "test_target.py::test_without_any_environment_envdoctors_own_interpreter_is_used_when_torch_is_beside_it",
    "test_inputs.py::test_diagnose_a_powershell_utf16_paste_through_the_cli",
    "test_launch.py::test_report_output_pattern_end_to_end",
    "test_healthcheck.py::test_hung_nvml_is_unhealthy_within_the_budget",
    "test_operators.py::test_a_hung_driver_fails_the_preflight_within_its_budget",
    "test_host.py::test_child_partial_records_survive_a_hang",
    "test_faults.py::test_a_hang_in_nvml_shutdown_is_reported_and_does_not_take_the_deadline",
    "test_libraries.py::test_a_library_that_hangs_on_load_is_a_timeout_within_the_deadline",
    "test_libraries.py::test_hanging_ldd_is_a_timeout_within_the_deadline",
    "test_nvidia_probes.py::test_a_hung_cuinit_leaves_nvml_reported",
    "test_nvidia_probes.py::test_hanging_cuinit_times_out_within_the_deadline",
    "test_nvidia_probes.py::test_cli_exits_3_when_nvml_init_hangs",
    "test_nvidia_probes.py::test_a_hang_in_nvml_shutdown_in_the_driver_child_is_reported_with_everything_read",
    "test_nvidia_probes.py::test_hanging_nvml_init_times_out_within_the_deadline_and_is_an_error",
    "test_nvidia_probes.py::test_a_hung_nvml_init_leaves_cuinit_reported_and_is_named_at_its_own_deadline",
    "test_paste_formats.py::test_hostile_long_lines_do_not_stall_the_parser",
    # Hangs a test waits out to its deadline (wall time, not CPU: they would hold a worker).
    "test_fakes.py::test_hang_on_load_never_returns_and_a_plain_build_loads",
    "test_libraries.py::test_hanging_ldconfig_is_a_timeout_within_the_deadline",
    "test_launch.py::test_shared_torch_probe_timeout_and_early_exit",
    # The output-leak and fault matrices: the scenarios that run a whole `check`; the rest stay fast.
    "test_canary.py::test_no_canary_in_any_output[check -v]",
    "test_canary.py::test_no_canary_in_any_output[check -v healthy]",
    "test_canary.py::test_no_canary_in_any_output[check]",
    "test_fault_matrix.py::test_fast_scenario[nvml/init-hang]",
    "test_fault_matrix.py::test_fast_scenario[signals/SIGINT-mid-probe]",
    "test_fault_matrix.py::test_fast_scenario[tools/ldconfig-floods]",
    "test_fault_matrix.py::test_fast_scenario[options/timeout-nan]",
    "test_fault_matrix.py::test_fast_scenario[torch/secret-in-error]",
    "test_fault_matrix.py::test_fast_scenario[output/-o-link-to-devnull]",
    "test_fault_matrix.py::test_fast_scenario[torch/prints-50mb-then-ok]",
    "test_fault_matrix.py::test_fast_scenario[torch/segfaults]",
    # The large hypothesis runs.
    "test_fuzz.py::test_any_report_shaped_json_loads_or_is_refused_in_one_line",
    "test_fuzz.py::test_pasted_text_in_any_mix_is_judged_or_refused",
})


def is_slow(file: str, name: str) -> bool:
    """Whether the test ``name`` (``test_x`` or ``test_x[id]``) of ``file`` (``test_cli.py``) is slow."""
    return file in SLOW_ONLY_FILES or f"{file}::{name}" in SLOW_TESTS or f"{file}::{name.split('[', 1)[0]}" in SLOW_TESTS
