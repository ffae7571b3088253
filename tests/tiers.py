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
    # `envdoctor diagnose` end to end on pasted tool logs and prose (a CLI child each).
    "test_tool_lines_and_prose.py::test_diagnose_judges_what_it_reads_and_refuses_only_nothing",
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
    "test_micro.py::test_a_main_thread_stuck_where_no_signal_reaches_it_is_reported_by_the_loader_watchdog",
    "test_micro.py::test_workers_that_never_return_a_batch_are_ended_at_the_deadline_and_the_loader_says_so",
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
    "test_distributed.py::test_from_the_repository_root",
    "test_big_report_memory.py::test_diff_of_two_58_mb_reports_stays_under_500_mb",
    "test_distributed.py::test_a_world_of_100000_with_one_rank_is_a_bounded_summary_and_sigterm_ends_it_at_once",
    # healthcheck --slurm against a stand-in scontrol (CLI runs, a hang and a scontrol deadline waited out), and
    # a real single-node Slurm (tests/slurm_cluster.py): slurmd runs the HealthCheckProgram, prolog, epilog, jobs.
    "test_slurm.py::test_healthy_and_drained_by_envdoctor_is_resumed_and_nothing_else_is_touched",
    "test_slurm.py::test_a_hung_driver_drains_within_the_budget_and_an_error_never_does",
    "test_slurm.py::test_scontrol_failing_or_hanging_is_an_error_within_the_hard_budget",
    "test_slurm.py::test_a_healthy_node_stays_idle",
    "test_slurm.py::test_a_broken_environment_drains_the_node_and_fixed_it_resumes",
    "test_slurm.py::test_a_node_drained_by_someone_else_is_left_alone",
    "test_slurm.py::test_a_missing_tool_or_a_probe_that_could_not_run_never_drains",
    "test_slurm.py::test_a_hung_driver_drains_the_node_within_the_budget",
    "test_slurm.py::test_the_prolog_refuses_an_unhealthy_node_and_the_epilog_drains_one_a_job_broke",
    "test_slurm.py::test_srun_two_tasks_check_distributed",
    "test_slurm.py::test_the_readme_sbatch_script_runs",
    # CLI runs end to end through every probe (with a torch child), and deadlines waited out.
    # envdoctor fix on seeded venvs: pip installs and two probe runs per venv (~20 venvs, a module fixture).
    "test_fix.py::test_seeded_venvs_are_fixed_and_verified_or_restored_byte_for_byte",
    "test_fix.py::test_the_constrained_companion_keeps_the_cuda_torch",
    "test_fix.py::test_the_refusal_of_an_externally_managed_interpreter_advises_a_venv",
    "test_fix.py::test_a_uv_managed_venv_is_changed_by_uv",
    "test_fix.py::test_without_yes_the_plan_is_printed_and_nothing_changes",
    "test_fix.py::test_a_kill_mid_install_leaves_a_byte_identical_freeze",
    "test_fix.py::test_after_a_kill_9_of_envdoctor_itself_restore_puts_the_snapshot_back",
    "test_fix.py::test_a_package_conda_installed_is_changed_by_the_envs_conda_as_planned_and_rolled_back_with_conda_meta",
    "test_fleet_store.py::test_the_readme_commands_run",  # two `fleet` CLI runs (pyarrow imported in each)
    "test_cli.py::test_check_runs_end_to_end_on_this_machine",
    # Screens through the CLI that run `check`/`report` with the torch child, or torchrun.
    "test_screens.py::test_check_json_prints_the_report_and_o_writes_it",
    "test_screens.py::test_check_o_keeps_the_screen",
    "test_screens.py::test_a_box_without_a_gpu_names_it_in_the_header_and_expect_gpus_fails",
    "test_screens.py::test_the_header_on_a_terminal_names_no_gpu_too",
    "test_screens.py::test_cluster_report_on_a_pipe_is_plain_lines_from_a_real_torchrun",
    "test_screens.py::test_an_empty_cuda_visible_devices_prints_unset_once_and_no_template_leftover",
    "test_screens.py::test_the_python_probe_reads_whether_the_target_is_externally_managed",
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
    # The fleet's engines: CLI runs over the stand-ins, promtool and a real node_exporter, the README's lines.
    "test_engines.py::test_a_target_no_engine_reads_is_a_usage_error_before_any_probe",
    "test_engines.py::test_the_healthcheck_writes_every_target_and_the_startup_plan_is_clicks",
    "test_engines.py::test_promtool_accepts_every_file_the_cli_writes",
    "test_engines.py::test_node_exporter_serves_the_series_the_gauge_follows_the_node_and_a_stale_writer_shows",
    "test_engines.py::test_npd_exit_codes_over_the_stand_ins_and_first_lines_within_80_bytes",
    "test_engines.py::test_npd_hung_nvml_init_is_unknown_within_the_budget_every_time",
    "test_engines.py::test_every_readme_configuration_line_runs",
    "test_operators.py::test_a_hung_driver_fails_the_preflight_within_its_budget",
    "test_host.py::test_child_partial_records_survive_a_hang",
    "test_host.py::test_a_hung_child_says_where_it_hung_even_with_fd_2_redirected",
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
    "test_statement_grid.py::test_a_seeded_sample_of_whole_texts_through_diagnose[2026-300]",
    # The whole grid (every catalogue GPU x every CUDA wheel of the last eight releases x every shape): the fast tier
    # keeps its seeded samples and the shared-name case.
    "test_statement_grid.py::test_every_shape_reads_every_wheels_torch_and_platform",
    "test_statement_grid.py::test_the_arch_verdict_over_the_whole_grid_is_the_matrix_s",
    "test_statement_grid.py::test_every_shape_reads_every_catalogue_gpu_and_its_compute_capability",
    # Hangs a test waits out to its deadline (wall time, not CPU: they would hold a worker).
    "test_fakes.py::test_hang_on_load_never_returns_and_a_plain_build_loads",
    "test_libraries.py::test_hanging_ldconfig_is_a_timeout_within_the_deadline",
    "test_launch.py::test_shared_torch_probe_timeout_and_early_exit",
    # The output-leak and fault matrices: the scenarios that run a whole `check`; the rest stay fast.
    "test_canary.py::test_no_canary_in_the_distributed_json",
    "test_canary.py::test_no_canary_in_any_output[check -v]",
    "test_canary.py::test_no_canary_in_any_output[check -v healthy]",
    "test_canary.py::test_no_canary_in_any_output[check]",
    "test_fault_matrix.py::test_fast_scenario[nvml/init-hang]",
    "test_fault_matrix.py::test_fast_scenario[torch/prints-50mb-binary-timeout-1-under-load]",  # two CPU burners
    "test_fault_matrix.py::test_fast_scenario[signals/SIGINT-mid-probe]",
    "test_fault_matrix.py::test_fast_scenario[tools/ldconfig-floods]",
    "test_fault_matrix.py::test_fast_scenario[options/timeout-nan]",
    "test_fault_matrix.py::test_fast_scenario[torch/secret-in-error]",
    "test_fault_matrix.py::test_fast_scenario[output/-o-link-to-devnull]",
    "test_fault_matrix.py::test_fast_scenario[torch/prints-50mb-then-ok]",
    "test_fault_matrix.py::test_fast_scenario[torch/segfaults]",
    "test_fault_matrix.py::test_fast_scenario[secrets/check-v]",
    "test_fault_matrix.py::test_fast_scenario[secrets/fleet-json]",
    "test_fault_matrix.py::test_fast_scenario[preflight/cwd-deleted-check]",
    "test_fault_matrix.py::test_fast_scenario[output/-o-dev-stdout]",
    "test_fault_matrix.py::test_fast_scenario[encoding/ascii-check]",
    "test_fault_matrix.py::test_fast_scenario[width/columns-0-diagnose]",
    "test_fault_matrix.py::test_fast_scenario[folder/fleet-counts-only-readable-schemas]",
    "test_fault_matrix.py::test_fast_scenario[warnings/pythonwarnings-error-healthcheck]",
    "test_fault_matrix.py::test_fast_scenario[children/python-hangs-ignoring-sigterm]",
    "test_fault_matrix.py::test_fast_scenario[distributed/store-listener-never-answers]",
    "test_fault_matrix.py::test_fast_scenario[starved/nofile-8-check]",
    "test_fault_matrix.py::test_fast_scenario[starved/pythonsafepath-healthcheck]",
    "test_starved.py::test_pythonsafepath_still_runs_the_children",
    "test_starved.py::test_out_of_file_descriptors_is_an_error_and_exit_3",
    "test_before_probing.py::test_exec_env_is_exactly_the_given_environment",
    "test_before_probing.py::test_exec_of_an_empty_command_is_127",
    "test_output_writes.py::test_report_o_dev_stdout_prints_the_report",
    "test_encodings.py::test_columns_zero_still_prints",
    "test_saved_faults.py::test_an_empty_folder_says_so",
    "test_encodings.py::test_a_value_that_is_not_utf8_keeps_the_json_valid",
    "test_encodings.py::test_a_narrow_encoding_prints_the_whole_report",
    "test_before_probing.py::test_a_deleted_working_directory_is_no_traceback",
    # The large hypothesis runs.
    "test_fuzz.py::test_any_report_shaped_json_loads_or_is_refused_in_one_line",
    "test_fuzz.py::test_pasted_text_in_any_mix_is_judged_or_refused",
})


def is_slow(file: str, name: str) -> bool:
    """Whether the test ``name`` (``test_x`` or ``test_x[id]``) of ``file`` (``test_cli.py``) is slow."""
    return file in SLOW_ONLY_FILES or f"{file}::{name}" in SLOW_TESTS or f"{file}::{name.split('[', 1)[0]}" in SLOW_TESTS
