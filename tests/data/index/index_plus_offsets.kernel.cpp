// Triton kernels are embedded as comments in /tmp/runs/index_plus_offsets.2/cache/358eee362f/inductor/crqgp5jcwpkq4idhygo5pvzeichx7wxfvwky4yvilcdxrrdbr22n/csse4hstsmjt6sogmvthifeoa4x3ldquzlfbl5yu2l47ckphghb7.wrapper.cpp

#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  cpp_fused_add_embedding_sum_0(const int64_t* in_ptr0,
                       const float* in_ptr1,
                       float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        #pragma GCC ivdep
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(16L); x0+=static_cast<int64_t>(1L))
        {
            for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(8L); x1+=static_cast<int64_t>(16L))
            {
                {
                    if(C10_LIKELY(x1 >= static_cast<int64_t>(0L) && x1 < static_cast<int64_t>(1)))
                    {
                        for (int64_t x1_tail = static_cast<int64_t>(0L);x1_tail < static_cast<int64_t>(8L); x1_tail++)
                        {
                            auto tmp0 = in_ptr0[static_cast<int64_t>(3L*x0)];
                            auto tmp15 = in_ptr0[static_cast<int64_t>(1L + 3L*x0)];
                            auto tmp26 = in_ptr0[static_cast<int64_t>(2L + 3L*x0)];
                            auto tmp1 = static_cast<int64_t>(0);
                            auto tmp2 = static_cast<int64_t>(1);
                            auto tmp3 = tmp1 < tmp2;
                            auto tmp4 = static_cast<int64_t>(2);
                            auto tmp5 = tmp1 < tmp4;
                            auto tmp6 = static_cast<int64_t>(20);
                            auto tmp7 = static_cast<int64_t>(55);
                            auto tmp8 = tmp5 ? tmp6 : tmp7;
                            auto tmp9 = tmp3 ? tmp1 : tmp8;
                            auto tmp10 = int64_t(tmp0 + tmp9);
                            auto tmp11 = tmp10;
                            auto tmp12 = c10::convert<int64_t>(tmp11);
                            AOTI_TORCH_CHECK((0 <= tmp12) & (tmp12 < 60L), "index out of bounds: 0 <= tmp12 < 60L");
                            auto tmp14 = in_ptr1[static_cast<int64_t>(x1_tail + 8L*tmp10)];
                            auto tmp16 = tmp2 < tmp2;
                            auto tmp17 = tmp2 < tmp4;
                            auto tmp18 = tmp17 ? tmp6 : tmp7;
                            auto tmp19 = tmp16 ? tmp1 : tmp18;
                            auto tmp20 = int64_t(tmp15 + tmp19);
                            auto tmp21 = tmp20;
                            auto tmp22 = c10::convert<int64_t>(tmp21);
                            AOTI_TORCH_CHECK((0 <= tmp22) & (tmp22 < 60L), "index out of bounds: 0 <= tmp22 < 60L");
                            auto tmp24 = in_ptr1[static_cast<int64_t>(x1_tail + 8L*tmp20)];
                            auto tmp25 = float(tmp14 + tmp24);
                            auto tmp27 = tmp4 < tmp2;
                            auto tmp28 = tmp4 < tmp4;
                            auto tmp29 = tmp28 ? tmp6 : tmp7;
                            auto tmp30 = tmp27 ? tmp1 : tmp29;
                            auto tmp31 = int64_t(tmp26 + tmp30);
                            auto tmp32 = tmp31;
                            auto tmp33 = c10::convert<int64_t>(tmp32);
                            AOTI_TORCH_CHECK((0 <= tmp33) & (tmp33 < 60L), "index out of bounds: 0 <= tmp33 < 60L");
                            auto tmp35 = in_ptr1[static_cast<int64_t>(x1_tail + 8L*tmp31)];
                            auto tmp36 = float(tmp25 + tmp35);
                            out_ptr0[static_cast<int64_t>(x1_tail + 8L*x0)] = tmp36;
                        }
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}

